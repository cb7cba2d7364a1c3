"""The Explore page's sink anatomy (Gu et al. 2024): every head's mean attention to the first token over the
built-in 64-token texts or the visitor's file, the sink ratio at a threshold epsilon (a slider), and the first
key's norm and cosine with the queries; a grid a click on which opens that head. A heavy action (ui/heavy.py),
computed once per (model, texts) for everyone (workbench.sinks)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.ui.escape import md
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.widgets import head_grid, parsed_upload
from attnviz.workbench import sinks as work

QUANTITIES = ("means", "key_norm", "cosine", "sink_mass")


def _grid(found, quantity: str) -> tuple[np.ndarray, dict]:
    """The [L, H] values of one quantity and score_grid's colour settings for it."""
    if quantity == "means":
        return np.asarray(found.means), {"zmin": 0.0, "zmax": 1.0}
    if quantity == "key_norm":  # below 1: the first key is shorter than the others
        ratio = np.divide(found.first_key_norm, found.other_key_norm, out=np.zeros_like(found.means),
                          where=np.asarray(found.other_key_norm) > 0)
        return ratio, {"zmin": 0.0, "zmax": max(float(ratio.max()), 1e-9)}
    if quantity == "cosine":
        return np.asarray(found.query_cosine), {"diverging": True}
    mass = np.asarray(found.sink_mass)
    return mass, {"zmin": 0.0, "zmax": max(float(mass.max()), 1e-9)}


def _visitor_texts() -> list[str] | None:
    """The uploaded file's first work.MAX_TEXTS texts (non-empty lines; a caption says when there were more);
    None before a file is given or when it cannot be read."""
    try:
        upload = parsed_upload(t("sinks_upload"), ["txt"], "sinks_file", work.uploaded_texts)
    except ValueError as error:
        st.warning(t("sinks_unreadable", error=md(error)))
        return None
    if upload is None:
        return None
    texts, more = upload
    if more:
        st.caption(t("sinks_first_taken", n=len(texts)))
    return texts


@st.fragment
@guarded
def sink_anatomy(model, source: str) -> None:
    with st.expander(t("sinks_title")):
        st.caption(t("sinks_caption"))
        # Labels made now, in this run's language: a format_func calling t() later would label the options in
        # the language of that later call (AppTest's walk, a language switch).
        sources = {False: t("sinks_texts_builtin"), True: t("sinks_texts_upload")}
        mine = st.radio(t("sinks_texts"), (False, True), horizontal=True, key="sinks_mine", format_func=sources.get)
        texts = None
        if mine:
            texts = _visitor_texts()
            if not texts:
                return
        bench = workbench()
        key = work.corpus_key(texts)
        found = work.result(bench, source, key)
        if found is None:
            found = heavy_action("sinks_run", t("sinks_run"), (source, key),
                                 lambda job: work.anatomy(bench, model, source, texts, progress=job.progress),
                                 lambda done, total: t("sinks_progress", done=done, total=total))
            if found is None:
                return
        epsilon = st.slider(t("sinks_epsilon"), 0.0, 1.0, 0.3, 0.05, key="sinks_epsilon")
        above = int((np.asarray(found.means) >= epsilon).sum())
        st.markdown(t("sinks_ratio", ratio=found.ratio(epsilon), above=above, total=found.means.size,
                      epsilon=epsilon, n=found.n_texts))
        if found.skipped:
            st.caption(t("sinks_skipped", n=found.skipped))
        names = {q: t(f"sinks_show_{q}") for q in QUANTITIES}
        quantity = st.selectbox(t("sinks_show"), QUANTITIES, key="sinks_show", format_func=names.get,
                                placeholder=t("choose_option"))
        values, colours = _grid(found, quantity)
        figure = plots.score_grid(values, t(f"sinks_show_{quantity}"), text=plot_text(), **colours)
        head_grid(st, figure, "sinks_grid", in_fragment=True)
        st.caption(t(f"sinks_note_{quantity}"))
