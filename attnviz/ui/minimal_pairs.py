"""The Explore page's minimal pairs: the Sentence against a second sentence that differs in one place,
every head's word-level attention difference (attnviz.analysis.minimal_pairs) and the model's preference
(attnviz.readouts.preference)."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.minimal_pairs import align_texts
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus, head_label, set_focus
from attnviz.ui.guard import guarded, public_message, workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.url_state import MAX_TEXT
from attnviz.workbench import minimal_pairs as pair_store
from attnviz.workbench.minimal_pairs import NOT_AVAILABLE, builtin_pairs, pair_from_texts

# Both sentences are run and compared on every change: a bound like the head detail's, far below the
# page's 512 tokens, keeps the L x H x words x words difference and the preference's passes small.
MAX_PAIR_TOKENS = 128


@functools.cache
def _builtin() -> dict:
    return {pair.id: pair for pair in builtin_pairs()}


def _pick_builtin() -> None:
    """A built-in pair sets the Sentence (the grammatical one) and the Second sentence (its twin)."""
    pair = _builtin().get(st.session_state.get("minpair_builtin"))
    if pair is not None:
        set_focus(text=pair.good, text_b=pair.bad)


def minimal_pair(model, source: str, text: str, has_pair: bool = False) -> None:
    """Not a fragment: picking a built-in pair changes the Sentence above, which reruns the whole page."""
    with st.expander(t("minpair_title"), expanded=bool(focus().text_b.strip())):
        st.caption(t("minpair_caption"))
        if has_pair:
            st.caption(t("minpair_pair_note"))
        labels = {pid: f"{pid}: {pair.good} / {pair.bad}" for pid, pair in _builtin().items()}
        st.selectbox(t("minpair_builtin"), list(labels), index=None, key="minpair_builtin", format_func=labels.get,
                     on_change=_pick_builtin, placeholder="…", help=t("minpair_builtin_help"))
        # The focus's second text: an encoder's sentence B above is the same text (one second text everywhere).
        second = st.text_input(t("minpair_second"), max_chars=MAX_TEXT, help=t("minpair_second_help"),
                               **bound("minpair_text", "text_b"))
        comparison(model, source, text, second.strip())


@st.fragment
@guarded
def comparison(model, source: str, text: str, second: str) -> None:
    if not second:
        st.info(t("minpair_empty"))
        return
    if max(len(model.encode(s).ids) for s in (text, second)) > MAX_PAIR_TOKENS:
        st.warning(t("minpair_too_long", n=MAX_PAIR_TOKENS))
        return
    try:
        alignment = align_texts(text, second)
    except ValueError:
        st.warning(t("minpair_same"))
        return
    try:  # over the memory budget, guarded's message ends the fragment
        diff = pair_store.difference(workbench(), source, text, second)
    except ValueError as error:
        st.warning(t("minpair_failed", error=md(public_message(error, source))))
        return
    st.caption(t(f"minpair_kind_{alignment.kind}", change=md(diff.labels[alignment.changed_slot]),
                 prefix=alignment.prefix, suffix=alignment.suffix))
    grid = diff.max_abs
    st.plotly_chart(plots.score_grid(grid, t("minpair_grid_title"), zmin=0, zmax=max(float(grid.max()), 1e-3),
                                     text=plot_text()), key="minpair_grid", width="stretch")
    n_layers, n_heads = grid.shape
    options = [f"{layer}.{head}" for layer in range(n_layers) for head in range(n_heads)]
    if st.session_state.get("minpair_head") not in options:  # first time, or another model
        st.session_state["minpair_head"] = options[int(np.argmax(grid))]
    shown = {o: f"{head_label(*map(int, o.split('.')))}  ({v:.3f})" for o, v in zip(options, grid.ravel())}
    chosen = st.selectbox(t("minpair_head"), options, key="minpair_head", format_func=shown.get,
                          placeholder=t("choose_option"))
    layer, head = (int(v) for v in chosen.split("."))
    st.plotly_chart(plots.difference_heatmap(diff.difference[layer, head], diff.labels, t("minpair_difference"),
                                             text=plot_text()), key="minpair_heatmap", width="stretch")
    st.caption(t("minpair_heatmap_caption", layer=layer, head=head))
    if model.info.causal:
        st.caption(t("minpair_causal_note"))
    preference_section(model, source, text, second)


def _pair(text: str, second: str):
    """A built-in pair when the two sentences are one (its own prefix and words), else the typed pair."""
    for pair in _builtin().values():
        if (pair.good, pair.bad) == (text, second):
            return pair
    return pair_from_texts(text, second)


def preference_section(model, source: str, text: str, second: str) -> None:
    st.markdown(f"**{t('minpair_preference')}**")
    try:  # over the memory budget, guarded's message (the comparison fragment's) ends it
        pair = _pair(text, second)
        result = pair_store.preference(workbench(), model, source, pair, text, second)
    except ValueError as error:
        if str(error) == NOT_AVAILABLE:
            st.info(t("minpair_no_preference"))
        else:
            st.warning(t("minpair_preference_failed", error=md(public_message(error, source))))
        return
    # The verdict compares the sums, or the per-token means when the scored spans differ in token count.
    mean = result.compares == "mean"
    margin = result.verdict_margin
    verdict = ("minpair_prefers_a" if margin > 0 else "minpair_prefers_b" if margin < 0 else "minpair_prefers_none")
    a, b = (result.mean_good, result.mean_bad) if mean else (result.good, result.bad)
    st.markdown(t(verdict + ("_mean" if mean else ""), a=a, b=b, margin=margin))
    table = {
        t("minpair_column_sentence"): [text, second],
        t("minpair_column_logprob"): [round(result.good, 4), round(result.bad, 4)],
    }
    if mean:
        table[t("minpair_column_mean")] = [round(result.mean_good, 4), round(result.mean_bad, 4)]
    table[t("minpair_column_count")] = [result.n_good, result.n_bad]
    table[t("minpair_column_tokens")] = [" | ".join(f"{tok!r} {lp:.2f}" for tok, lp in tokens)
                                         for tokens in (result.tokens_good, result.tokens_bad)]
    st.dataframe(table, hide_index=True)
    note = t(f"minpair_method_{result.method}", prefix=md(pair.prefix or ""))
    note += " " + (t("minpair_compares_mean", a=result.n_good, b=result.n_bad) if mean
                   else t("minpair_compares_sum", n=result.n_good))
    if result.first_token_unscored:
        note += " " + t("minpair_first_token")
    st.caption(note)
