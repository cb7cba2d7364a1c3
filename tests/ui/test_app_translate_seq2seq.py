"""AppTest of the Translate page on tiny local T5 and BART folders (random weights, real fast tokenizers built
offline in tests/parity/test_parity_seq2seq_t5_bart.py): the model loads from a folder the operator allows, T5's
task prefix is an editable field prefilled and read as part of the source (its tokens are among the chips
and the attention maps' columns), and the three attention kinds and the word alignment work on both."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.pages import TRANSLATE as PAGE
from tests.helpers.pages import chart, z_array
from tests.helpers.seq2seq import bart_tokenizer, hf_bart, hf_t5, t5_tokenizer

SOURCE = "The keys to the cabinet are on the table."
TARGET = "Der Schlüssel liegt auf dem Tisch."


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq2seq-models")
    for name, tokenizer, make in (("tiny-t5", t5_tokenizer(), hf_t5), ("tiny-bart", bart_tokenizer(), hf_bart)):
        tokenizer.save_pretrained(root / name)
        make(vocab=len(tokenizer)).save_pretrained(root / name)
    return root


def open_model(folder: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(folder.parent))
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    at.text_input(key="translate_custom").input(str(folder)).run()
    clean(at)
    assert not at.sidebar.error, [e.value for e in at.sidebar.error]
    return at


def clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def axis_tokens(figure: dict, axis: str) -> list[str]:
    return [html.unescape(label) for label in figure["layout"][axis]["ticktext"]]


def chip_tokens(at: AppTest) -> list[str]:
    """The token chips' texts, in order (ui/explore.py's token_chips)."""
    body = " ".join(e.proto.body for e in at.get("html"))
    return [html.unescape(text) for text in re.findall(r'<span class="avc[^"]*">(.*?)<sub', body)]


def test_t5_prefix_is_shown_editable_and_read(folders, monkeypatch):
    at = open_model(folders / "tiny-t5", monkeypatch)
    prefix = at.text_input(key="translate_prefix")
    assert prefix.value == "translate English to German: "
    at.text_area(key="translate_source").input(SOURCE).run()
    at.text_input(key="translate_target").input(TARGET).run()
    clean(at)
    # the prefix's tokens are source tokens, chips of their own in front of the sentence's
    shown = re.sub(r"##|\[\d+/\d+\]|▁", "", "".join(chip_tokens(at)))  # continuation and shared-span marks
    assert shown.startswith("translateEnglishtoGerman:Th")
    cross = chart(at, "translate_head_view")
    columns = axis_tokens(cross, "xaxis")
    assert "".join(columns).replace("▁", "").startswith("translateEnglishtoGerman:")
    assert columns[-1] == "</s>" and axis_tokens(cross, "yaxis")[0] == "<pad>"  # T5 starts from <pad>
    grid = chart(at, "translate_alignment_grid")
    assert axis_tokens(grid, "xaxis")[:4] == ["translate", "English", "to", "German"]
    assert axis_tokens(grid, "yaxis") == ["Der", "Schlüssel", "liegt", "auf", "dem", "Tisch", "."]
    assert at.query_params["tprefix"] == "translate English to German: "
    at.text_input(key="translate_prefix").input("summarize: ").run()  # another task: what the model reads changes
    clean(at)
    assert axis_tokens(chart(at, "translate_alignment_grid"), "xaxis")[0] == "summarize"
    for kind in ("encoder", "decoder"):
        at.radio(key="translate_kind").set_value(kind).run()
        clean(at)
        head = z_array(chart(at, "translate_head_view")["data"][0])
        assert head.shape[0] == head.shape[1]


def test_bart_has_no_prefix_and_aligns(folders, monkeypatch):
    at = open_model(folders / "tiny-bart", monkeypatch)
    assert not [w for w in at.text_input if w.key == "translate_prefix"]
    at.text_input(key="translate_target").input(TARGET).run()
    clean(at)
    cross = chart(at, "translate_head_view")
    assert axis_tokens(cross, "xaxis")[0] == "<s>" and axis_tokens(cross, "xaxis")[-1] == "</s>"
    assert axis_tokens(cross, "yaxis")[:2] == ["</s>", "<s>"]  # BART's decoder starts from </s>, then <s>
    grid = chart(at, "translate_alignment_grid")
    assert axis_tokens(grid, "xaxis")[:2] == ["The", "keys"]
    assert at.dataframe[0].value.shape[0] > 0
    at.text_input(key="translate_target").input("").run()  # the model's own (greedy) output
    clean(at)
    assert any(m.value.startswith("**Translation (greedy") for m in at.markdown)


def test_t5_encoder_scores_are_attributed_with_their_bucket_term(folders, monkeypatch):
    """The encoder's head detail splits a score by earlier components, T5's bucket bias a term of its own, and
    the page's check says the terms add up to the model's score; BART's (post-norm) offers no split."""
    at = open_model(folders / "tiny-t5", monkeypatch)
    at.text_area(key="translate_source").input(SOURCE).run()
    at.radio(key="translate_kind").set_value("encoder").run()
    at.selectbox(key="translate_layer").set_value(1).run()
    at.toggle(key="qka_on").set_value(True).run()
    clean(at)
    check = next(c.value for c in at.caption if c.value.startswith("Score "))
    score, total = (float(v) for v in re.findall(r"-?\d+\.\d{4}", check)[:2])
    assert abs(score - total) <= 1e-4
    labels = chart(at, "qka_matrix")["layout"]["yaxis"]["ticktext"]  # by layer first
    assert labels[:2] == ["embeddings", "L0 heads"] and labels[-1] == "T5 bucket"
    at.toggle(key="qka_grouped").set_value(False).run()
    labels = chart(at, "qka_matrix")["layout"]["yaxis"]["ticktext"]
    assert labels[:2] == ["embedding", "L0 H0"] and "L0.MLP" in labels and labels[-1] == "T5 bucket"
    assert "query from" in at.markdown[-1].value  # the largest terms, told as sentences
    bart = open_model(folders / "tiny-bart", monkeypatch)
    bart.text_area(key="translate_source").input(SOURCE).run()
    bart.radio(key="translate_kind").set_value("encoder").run()
    clean(bart)
    assert not [w for w in bart.toggle if w.key == "qka_on"]
