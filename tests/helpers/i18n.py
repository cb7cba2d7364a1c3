"""What test_i18n's rule reads from a page (see tests/ui/test_i18n.py's docstring): every visible string,
what is allowed in either language, and `walk`, which shows a page in one language and finds the other."""

from __future__ import annotations

import html
import json
import re

from streamlit.testing.v1 import AppTest

from attnviz.loading.families import FAMILIES
from attnviz.loading.random_model import RANDOM_MODEL_NAME
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.readouts.preference import builtin_pairs
from attnviz.ui.explore import EXAMPLES
from attnviz.ui.strings import LANGUAGES
from attnviz.workbench.shelf import PRESETS
from tests.conftest import MINILM, SMOLLM

# Names that stay as they are in every language: model ids, products, formats, paper titles, symbols.
ALLOWED_PHRASES = sorted({
    *(name for name in PRESETS if name != RANDOM_MODEL_NAME), MINILM, SMOLLM,
    *(name.rsplit("/", 1)[-1] for name in PRESETS),  # the preset box shows names without their owner
    # architectures are names: the Learn page's table of attention kinds lists them as HF spells them
    *(family.name for family in FAMILIES), *(t for family in FAMILIES for t in family.model_types),
    "bert-base-cased", "FacebookAI/roberta-base", "BERT-base", "GPT-2", "Hugging Face", "MultiHeadAttention",
    "Attention Is All You Need", "docs/api.md", "docs/formats.md", "ATTNVIZ_MODEL_DIRS", "ATTNVIZ_MEMORY_BUDGET_GB",
    "CoNLL-U",
    "d_model", "d_ff", "d_k", "d_v", "n_heads", "n_kv_heads", "head_dim",
    "[CLS]", "[SEP]", "[UNK]", "<unk>", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
}, key=len, reverse=True)
ALLOWED_WORDS = {
    "attnviz", "MiniLM", "SmolLM", "SmolLM2", "BERT", "Llama", "Transformer", "softmax",
    "MHA", "MQA", "GQA", "KV", "BOS", "CLS", "SEP", "UNK", "NPZ", "JSON", "CSV", "JSONL", "WinoBias", "GGUF", "gguf",
    "README", "Hub", "ID", "GB", "MB", "nats",
    "Olsson", "Clark", "Xiao", "Vaswani", "Voita", "Wu", "Gu", "Ferrando", "Luger", "Kamath",  # authors cited
    "HeadVis",  # issue 37's atlas: the tool whose metrics it computes
    "Yeh", "AttentionViz",  # issue 28's corpus map: its paper's author and tool
    "bert", "llama", "cpu", "cuda",  # the model's facts line: family and device
    "NoPE", "ALiBi", "MLP", "logit", "c2c", "c2p", "p2c", "yarn", "longrope", "llama3", "linear",  # attention kinds
}
ALLOWED_PATTERNS = [
    re.compile(r"`[^`]*`"),  # inline code
    re.compile(r"\b[LH]\d+\b|\bkv\d+\b"),  # head names: L0, H3, kv1
    re.compile(r"\b(?:b?float|u?int)\d+\b"),  # the model's dtype
]
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")
CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef]")
TAG = re.compile(r"<[^>]*>")
STYLE = re.compile(r"<style>.*?</style>", re.S)
PLACEHOLDER = re.compile(r"%\{[^}]*\}")
MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def data_words(*texts: str) -> set[str]:
    """The words of data shown on the page (sentences, probe items): allowed in either language."""
    return {word for text in texts for word in re.findall(r"[A-Za-z]+|[^\x00-\x7f]+", text)}


# The built-in minimal pairs are data too (a pick of them is offered whatever the language).
EXAMPLE_WORDS = data_words(*EXAMPLES, *(f"{p.id} {p.good} {p.bad}" for p in builtin_pairs()),
                           *(f"{p.id} {p.clean} {p.corrupt} {p.target} {p.contrast}" for p in builtin_patch_pairs()))


def figure_texts(spec: str) -> list[str]:
    """The visible words of a plotly figure: titles, tick texts, colour bars, annotations, hovers."""
    figure = json.loads(spec)
    texts = []

    def title(value):
        if isinstance(value, dict):
            value = value.get("text")
        if value:
            texts.append(value)

    layout = figure.get("layout", {})
    title(layout.get("title"))
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            title(axis.get("title"))
            texts.extend(str(v) for v in axis.get("ticktext", []))
    texts.extend(a.get("text", "") for a in layout.get("annotations", []))
    for trace in figure.get("data", []):
        for colorbar in (trace.get("colorbar", {}), trace.get("marker", {}).get("colorbar", {})):
            title(colorbar.get("title"))
            texts.extend(str(v) for v in colorbar.get("ticktext", []))
        hover = trace.get("hovertemplate")
        for template in (hover if isinstance(hover, list) else [hover] if hover else []):
            texts.append(PLACEHOLDER.sub(" ", template.replace("<extra></extra>", "")))
    return [html.unescape(TAG.sub(" ", text)) for text in texts]


def visible(at: AppTest, token_column: str) -> list[tuple[str, str]]:
    """(where, text) for every visible string of the page (see the module docstring)."""
    found = []

    def add(where, *texts):
        found.extend((where, str(text)) for text in texts if text)

    for node in at._tree:
        kind = getattr(node, "type", "")
        name = type(node).__name__
        if name in ("Code", "Latex") or kind in ("code", "latex"):
            continue
        for attribute in ("label", "help", "placeholder"):
            value = getattr(node, attribute, None)
            if isinstance(value, str):
                add(f"{kind}.{attribute}", value)
        if isinstance(getattr(node, "options", None), list):
            add(f"{kind}.options", *node.options)
        if name in ("Title", "Header", "Subheader", "Markdown", "Caption", "Error", "Warning", "Info", "Success",
                    "Text", "Toast"):
            add(kind, node.value)
        elif kind == "html":
            add(kind, html.unescape(TAG.sub(" ", STYLE.sub(" ", node.proto.body))))  # CSS is no visible text
        elif name == "Dataframe":
            table = node.value
            add("dataframe.columns", *map(str, table.columns))
            for column in table.columns:
                if column != token_column:
                    add(f"dataframe[{column}]", *(v for v in table[column].tolist() if isinstance(v, str)))
        elif kind == "plotly_chart":
            add(f"plotly_chart {node.proto.id.rsplit('-', 1)[-1]}", *figure_texts(node.proto.spec))
    return found


def strip_allowed(text: str) -> str:
    text = MARKDOWN_ESCAPE.sub(r"\1", text)  # md() escapes every ASCII punctuation mark of a name
    for phrase in ALLOWED_PHRASES:
        text = text.replace(phrase, " ")
    for pattern in ALLOWED_PATTERNS:
        text = pattern.sub(" ", text)
    return text


def untranslated(at: AppTest, language: str, data: set[str] = frozenset()) -> list[tuple[str, str]]:
    """Visible strings in the wrong language: English words in Chinese, CJK characters in English."""
    shown_data = {word.lower() for word in EXAMPLE_WORDS | set(data)}
    cjk_data = "\n".join(word for word in shown_data if CJK.search(word))
    wrong = []
    for where, text in visible(at, "词元" if language == "zh" else "token"):
        if where == "radio.options" and text in LANGUAGES.values():  # each language named in itself
            continue
        rest = strip_allowed(text)
        if language == "zh":
            bad = [w for w in ENGLISH_WORD.findall(rest) if w not in ALLOWED_WORDS and w.lower() not in shown_data]
        else:
            bad = [run for run in re.findall(r"[^\x00-\x7f]+", rest) if CJK.search(run) and run not in cjk_data]
        if bad:
            wrong.append((where, text[:160]))
    return wrong


def walk(at: AppTest, language: str, data: set[str] = frozenset()) -> None:
    """Show the page in `language` and assert that it holds nothing of the other one."""
    if at.radio(key="lang").value != language:
        at.radio(key="lang").set_value(language).run()
    assert not at.exception, [e.value for e in at.exception]
    wrong = untranslated(at, language, data)
    assert not wrong, "\n".join(f"{where}: {text!r}" for where, text in wrong)
