"""Widgets used by more than one page."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis import rank_heads
from attnviz.ui.common import t
from attnviz.ui.escape import md

TOP_HEADS_SHOWN = 10


def word_pair_ranking(trace, key_prefix: str) -> list[tuple[int, int, float]]:
    """Pick a source and a target word of the trace; show every head ranked by word-level attention from
    source to target (docs/architecture.md word rule). Returns the full ranking ([] until two words are chosen)."""
    words = trace.words
    # Only words that have tokens, at most one a token: a truncated 4 MB text has millions of words, and
    # sending them all as options crashed the browser tab.
    choices = sorted({word for word in trace.word_of_token if word is not None})
    if len(choices) < 2:
        return []
    label = lambda i: f"{i}: {words[i]}"  # noqa: E731
    cols = st.columns(2)
    source = cols[0].selectbox(t("source_word"), choices, format_func=label,
                               key=f"{key_prefix}_source", index=None)
    target = cols[1].selectbox(t("target_word"), choices, format_func=label,
                               key=f"{key_prefix}_target", index=None)
    if source is None or target is None:
        return []
    if source == target:
        st.info(t("same_word"))
        return []
    try:
        ranking = rank_heads(trace, source, target)
    except ValueError as error:  # a word lost to truncation has no token
        st.warning(md(error))
        return []
    st.markdown(t("top_heads", source=md(words[source]), target=md(words[target])))
    st.dataframe(
        {t("column_layer"): [r[0] for r in ranking[:TOP_HEADS_SHOWN]],
         t("column_head"): [r[1] for r in ranking[:TOP_HEADS_SHOWN]],
         t("column_attention"): [round(r[2], 4) for r in ranking[:TOP_HEADS_SHOWN]]},
        hide_index=True,
    )
    return ranking
