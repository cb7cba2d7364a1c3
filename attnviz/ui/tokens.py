"""The input as the model reads it, shown on the pages that draw a text's attention (Explore, its long-text
body, Translate): its tokens as chips, and notices of a cut text or one mostly of unknown tokens."""

from __future__ import annotations

import html

import streamlit as st

from attnviz import plots
from attnviz.analysis.views import piece_runs, token_labels, visible_token, word_runs
from attnviz.ui.escape import md
from attnviz.ui.language import t
from attnviz.workbench import shelf

UNKNOWN_TOKENS = ("[UNK]", "<unk>", "<UNK>")
UNKNOWN_SHARE_NOTICE = 0.2  # above this share of unknown tokens, suggest a model with a wider vocabulary


def input_notices(model, trace, limit: int | None = None) -> None:
    """Truncation at `limit` (default: the model's full-map limit) and a text mostly of unknown tokens."""
    if trace.truncated:
        st.warning(t("truncated", n=limit or model.info.max_tokens))
    unknown = [i for i, (tok, special) in enumerate(zip(trace.input_ids, trace.special_mask))
               if not special and model.tokenizer.id_to_token(tok) in UNKNOWN_TOKENS]
    real = sum(not s for s in trace.special_mask)
    if real and len(unknown) / real > UNKNOWN_SHARE_NOTICE:
        unk = model.tokenizer.id_to_token(trace.input_ids[unknown[0]])
        st.warning(t("many_unk", share=len(unknown) / real, unk=md(unk), suggestion=shelf.WIDE_VOCABULARY_MODEL))


# Past this many tokens the chips are shown a window at a time: 4,096 chips would be about 1 MB each rerun.
CHIP_WINDOW = 256


def token_chips(trace, token_bytes=None) -> None:
    """Tokens as chips with their ids, the chips of one word underlined together (its word in the tooltip);
    the byte pieces of one character as one chip of that character, its pieces (their bytes, with
    `token_bytes(id)`, e.g. LoadedModel.token_bytes) a click away. Every piece of text is escaped, so markup in
    the input stays text. A long text's chips are shown CHIP_WINDOW at a time, from a token the visitor picks."""
    n = len(trace.tokens)
    with st.expander(f"{t('tokens')} ({n})", expanded=n <= 40):
        start, stop = 0, n
        if n > CHIP_WINDOW:
            if not 0 <= st.session_state.get("chips_start", 0) < n:  # a shorter text than the last one
                st.session_state["chips_start"] = 0
            start = int(st.number_input(t("tokens_from"), 0, n - 1, step=CHIP_WINDOW, key="chips_start",
                                        help=t("tokens_from_help", n=CHIP_WINDOW)))
            stop = min(start + CHIP_WINDOW, n)
            st.caption(t("tokens_window", first=start, last=stop - 1, n=n))
        # st.html, not st.markdown: Markdown and LaTeX would read `$`, backticks, `_` or `~` in a token as
        # formulas, code or emphasis and swallow the chips' own markup.
        # The chips' look once, in classes: inline on every chip it was about 60 KB of a long text's page.
        st.html(f'{CHIP_CSS}<div class="attnviz-chips">{"".join(_chips(trace, start, stop, token_bytes))}</div>')


# One chip: `avc`, with `sp` for a special token, `pc` for a byte piece, `ch` for a character of pieces.
CHIP_CSS = ("<style>.attnviz-chips{line-height:1.9}"
            ".avc{background:#e8f0fe;border-radius:6px;padding:1px 6px;margin:2px;display:inline-block;"
            "font-family:monospace}.avc sub{color:#888}.avc.sp{background:#eee;color:#555}"
            ".avc.pc{background:#f1f3f4}.avc.ch{outline:1px dashed #8ab4f8}"
            ".attnviz-word{display:inline-block;border-bottom:2px solid #8ab4f8;margin:0 5px 0 0}"
            ".attnviz-pieces{display:inline-block;vertical-align:top}"
            ".attnviz-pieces summary{list-style:none;cursor:pointer;display:inline-block}</style>")


def _chip(shown: str, sub: str, kind: str = "") -> str:
    """One chip's HTML, of text already escaped; `kind` one of CHIP_CSS's modifiers."""
    return f'<span class="avc{" " + kind if kind else ""}">{shown}<sub> {sub}</sub></span>'


def _chips(trace, start: int, stop: int, token_bytes=None) -> list[str]:
    """The HTML of tokens start..stop, one string a token: a run of one character's byte pieces is one chip at
    its first token (the others ""), a run of one word's tokens wrapped in one underlined span."""
    labels, chips = token_labels(trace), []
    for token, token_id, special in zip(labels[start:stop], trace.input_ids[start:stop],
                                        trace.special_mask[start:stop]):
        # escape_label makes blank tokens visible ("␣"); HTML escaping is html.escape's job alone here, as
        # escape_label's own entities (for plotly) would be escaped twice and show as "&lt;".
        shown = html.escape(token if special or token.strip() else plots.escape_label(token))
        chips.append(_chip(shown, str(token_id), "sp" if special else ""))
    for a, b in piece_runs(trace):
        a, b = max(a, start), min(b, stop)
        if b - a > 1:
            chips[a - start:b - start] = [_character_chip(trace, labels, a, b, token_bytes)] + [""] * (b - a - 1)
    runs = [(word, max(a, start) - start, min(b, stop) - start) for word, a, b in word_runs(trace)
            if a < stop and b > start]
    for word, a, b in reversed(runs):  # word boundaries (docs/api.md word rule)
        if word is not None:
            name = html.escape(trace.words[word])
            chips[a:b] = [f'<span class="attnviz-word" data-word="{name}" title="{name}">'
                          f'{"".join(chips[a:b])}</span>'] + [""] * (b - a - 1)
    return chips


def _character_chip(trace, labels: list[str], a: int, b: int, token_bytes=None) -> str:
    """Tokens a..b, byte pieces of one character: a chip of the character (with "##" when it continues a word,
    as its first piece's label has it), and, in a <details> it opens on a click, a chip for each piece: its
    bytes when `token_bytes` gives them (else its "[k/n]" label) and its id."""
    shown = html.escape(labels[a].rsplit("[", 1)[0])  # "##明[1/2]" -> "##明"
    pieces = []
    for k in range(a, b):
        piece = token_bytes(trace.input_ids[k]) if token_bytes is not None else None
        text = "⟨" + " ".join(f"{byte:02x}" for byte in piece) + "⟩" if piece else labels[k]
        pieces.append(_chip(html.escape(text), str(trace.input_ids[k]), "pc"))
    return (f'<details class="attnviz-pieces"><summary title="{html.escape(t("chip_pieces", n=b - a))}">'
            f'{_chip(shown, "×" + str(b - a), "ch")}</summary>{"".join(pieces)}</details>')


MAX_PIECES = 4  # a UTF-8 character has at most 4 bytes, so its pieces are at most 4 tokens


def shown_tokens(model, ids) -> list[str]:
    """Each token as the text it stands for, the same in every table, axis and message: a leading space as
    ␣ (never the vocabulary's Ġ, ▁ or ##), and the byte pieces of one character (byte-level BPE splits 书
    and emoji into 2-4 tokens) joined into that character, each piece marked [k/n]: 书[1/2], 书[2/2]."""
    ids = [int(i) for i in ids]
    texts = model.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)
    pieces = [model.token_bytes(i) for i in ids]
    shown, k = [], 0
    while k < len(ids):
        run = _character_run(pieces, k)
        if run is None:  # a WordPiece continuation decodes alone as "##bel": the mark is the vocabulary's
            text = texts[k][2:] if texts[k].startswith("##") and len(texts[k]) > 2 else texts[k]
            shown.append(visible_token(text, pieces[k]))
            k += 1
            continue
        end, text = run
        shown += [f"{visible_token(text)}[{j + 1}/{end - k}]" for j in range(end - k)]
        k = end
    return shown


def text_tokens(model, text: str) -> list[str]:
    """`shown_tokens` of a text as the readouts encode it (recorded_run.encode_text: special tokens added),
    so their positions index this list."""
    return shown_tokens(model, model.encode(text).ids)


def each_token(model, ids) -> list[str]:
    """Tokens that do not follow one another (a read's top predictions, a grid's cells), each on its own: a
    piece of a character stays its bytes, ⟨e4 b9⟩."""
    ids = [int(i) for i in ids]
    seen = {i: shown_tokens(model, [i])[0] for i in set(ids)}
    return [seen[i] for i in ids]


def _character_run(pieces: list[bytes | None], k: int) -> tuple[int, str] | None:
    """(end, text) when token k is a piece of a character that tokens k..end-1 make whole, else None."""
    if pieces[k] is None:
        return None
    try:
        pieces[k].decode("utf-8")
        return None  # whole characters already
    except UnicodeDecodeError:
        pass
    joined = pieces[k]
    for end in range(k + 1, min(k + MAX_PIECES, len(pieces)) + 1):
        if end > k + 1:
            if pieces[end - 1] is None:
                return None
            joined += pieces[end - 1]
        try:
            return end, joined.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def spaced_alternative(model, typed: str | None) -> str | None:
    """" are" when `typed` ("are") has no leading space, " are" is one token of this model, and a different
    one: a byte-level BPE keeps a word inside a sentence as the spaced token, and the unspaced one scores
    another logit (the issue's 1.1464 against 3.4097). None where there is nothing to offer (WordPiece and
    SentencePiece map both to one token)."""
    if not typed or typed[0].isspace():
        return None
    spaced = list(model.encode(" " + typed, add_special_tokens=False).ids)
    if len(spaced) != 1 or list(model.encode(typed, add_special_tokens=False).ids) == spaced:
        return None
    return " " + typed
