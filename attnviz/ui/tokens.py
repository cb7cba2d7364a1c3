"""The input as the model reads it, shown on the pages that draw a text's attention (Explore, its long-text
body, Translate): its tokens as chips, and notices of a cut text or one mostly of unknown tokens."""

from __future__ import annotations

import html

import streamlit as st

from attnviz import plots
from attnviz.analysis.views import token_labels, word_runs
from attnviz.ui.common import t
from attnviz.ui.escape import md
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


def token_chips(trace) -> None:
    """Tokens as chips with their ids, the chips of one word underlined together (its word in the tooltip);
    every piece of text is escaped, so markup in the input stays text. A long text's chips are shown
    CHIP_WINDOW at a time, from a token the visitor picks."""
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
        st.html(f'<div style="line-height:1.9">{"".join(_chips(trace, start, stop))}</div>')


def _chips(trace, start: int, stop: int) -> list[str]:
    """The HTML of tokens start..stop, a run of one word's tokens wrapped in one underlined span."""
    chips = []
    for token, token_id, special in zip(token_labels(trace)[start:stop], trace.input_ids[start:stop],
                                        trace.special_mask[start:stop]):
        # escape_label makes blank tokens visible ("␣"); HTML escaping is html.escape's job alone here, as
        # escape_label's own entities (for plotly) would be escaped twice and show as "&lt;".
        shown = html.escape(token if special or token.strip() else plots.escape_label(token))
        style = "background:#eee;color:#555" if special else "background:#e8f0fe"
        chips.append(
            f'<span style="{style};border-radius:6px;padding:1px 6px;margin:2px;display:inline-block;'
            f'font-family:monospace">{shown}<sub style="color:#888"> {token_id}</sub></span>'
        )
    runs = [(word, max(a, start) - start, min(b, stop) - start) for word, a, b in word_runs(trace)
            if a < stop and b > start]
    for word, a, b in reversed(runs):  # word boundaries (docs/architecture.md word rule)
        if word is not None:
            name = html.escape(trace.words[word])
            chips[a:b] = [f'<span class="attnviz-word" data-word="{name}" title="{name}" style="display:'
                          f'inline-block;border-bottom:2px solid #8ab4f8;margin:0 5px 0 0">'
                          f'{"".join(chips[a:b])}</span>']
    return chips
