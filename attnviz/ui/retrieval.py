"""The Head Finder page's retrieval heads (Wu et al. 2024): a layers x heads grid of retrieval scores on the
built-in needle-in-a-haystack prompts, then the top heads switched off against as many random heads. Both
are heavy actions (ui/heavy.py: progress, Cancel, the heavy-work slot); workbench.retrieval computes them."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.ui.focus import head_label
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.workbench import retrieval as work

DEFAULT_NEEDLES = 3
MAX_OFF = 30  # heads switched off at most: Wu et al. switch off up to 100 of Llama's 1,024 heads


@st.fragment
@guarded
def retrieval_section(model, source: str) -> None:
    st.subheader(t("retrieval_title"))
    st.caption(t("retrieval_caption"))
    if not model.info.causal:
        st.info(t("retrieval_decoders_only"))
        return
    n_needles_max = work.N_NEEDLES
    left, right = st.columns(2)
    haystack = left.selectbox(t("retrieval_haystack"), work.HAYSTACK_CHOICES, key="retrieval_haystack",
                              index=work.HAYSTACK_CHOICES.index(work.DEFAULT_HAYSTACK_TOKENS),
                              help=t("retrieval_haystack_help"))
    n_needles = right.slider(t("retrieval_needles"), 1, n_needles_max, DEFAULT_NEEDLES, key="retrieval_needles")
    bench = workbench()
    result = work.grid_result(bench, source, haystack, n_needles)
    if result is None:
        result = heavy_action(
            "retrieval_run", t("retrieval_run", n=n_needles), (source, haystack, n_needles),
            lambda job: work.retrieval_grid(bench, model, source, haystack, n_needles, progress=job.progress),
            lambda done, total: t("retrieval_progress", done=done, total=total))
        if result is None:
            return
    show_runs(result)
    if result.grid is None:
        st.warning(t("retrieval_none_answered"))
        return
    grid = np.asarray(result.grid, dtype=np.float64)
    st.caption(t("retrieval_grid_caption", answered=result.n_answered, n=len(result.runs),
                 share=float((grid >= 0.1).mean())))
    st.plotly_chart(plots.score_grid(grid, t("retrieval_grid_title"), zmin=0.0, zmax=max(float(grid.max()), 1e-9),
                                     text=plot_text()), key="retrieval_grid", width="stretch")
    switch_off(model, source, haystack, n_needles, grid)


def show_runs(result) -> None:
    """Each prompt's question, expected answer, the model's reply and whether it holds the answer: a table,
    so the model's text is data, never markup."""
    st.dataframe({
        t("retrieval_column_tokens"): [run.prompt.n_tokens for run in result.runs],
        t("retrieval_column_question"): [run.prompt.needle.question for run in result.runs],
        t("retrieval_column_answer"): [run.prompt.needle.answer for run in result.runs],
        t("retrieval_column_reply"): [run.continuation for run in result.runs],
        t("retrieval_column_found"): [run.answered for run in result.runs],
    }, hide_index=True, key="retrieval_runs")


def switch_off(model, source: str, haystack: int, n_needles: int, grid: np.ndarray) -> None:
    total = model.info.n_layers * model.info.n_heads
    if total < 2:  # nothing left to compare with
        return
    st.markdown(t("retrieval_off_title"))
    n_off = int(st.number_input(t("retrieval_off_n"), 1, min(MAX_OFF, total - 1), min(10, total - 1),
                                key="retrieval_off_n", help=t("retrieval_off_help")))
    bench = workbench()
    comparison = work.ablation_result(bench, source, haystack, n_needles, n_off)
    if comparison is None:
        comparison = heavy_action(
            "retrieval_off_run", t("retrieval_off_run", n=n_off), (source, haystack, n_needles, n_off),
            lambda job: work.ablation(bench, model, source, haystack, n_needles, n_off, grid, progress=job.progress),
            lambda done, total: t("retrieval_progress", done=done, total=total))
        if comparison is None:
            return
    n = len(comparison.answered_all_on)
    seeds = len(comparison.random)
    random_found = sum(sum(row) for row in comparison.answered_random_off)
    st.dataframe({
        t("retrieval_column_condition"): [t("retrieval_all_on"), t("retrieval_top_off", n=n_off),
                                          t("retrieval_random_off", n=n_off, seeds=seeds)],
        t("retrieval_column_retrieved"): [f"{sum(comparison.answered_all_on)} / {n}",
                                          f"{sum(comparison.answered_top_off)} / {n}",
                                          f"{random_found} / {n * seeds}"],
        t("retrieval_column_heads"): [
            "", ", ".join(head_label(layer, head) for layer, head in comparison.top),
            " | ".join(", ".join(head_label(layer, head) for layer, head in draw) for draw in comparison.random),
        ],
    }, hide_index=True, key="retrieval_off_table")
