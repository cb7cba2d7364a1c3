"""The head detectors section (Olsson et al. 2022) of the Explore page, for a full or a long text: one grid a
detector, every layer and head, a click opening that head."""

from __future__ import annotations

import streamlit as st

from attnviz import plots
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.widgets import head_grid
from attnviz.workbench import heads as head_work


@st.fragment
@guarded
def head_detectors(model, name: str) -> None:
    """Previous-token, duplicate-token and induction heads (Olsson et al. 2022), found on repeated random
    tokens: a heavy action, run once per model for everyone, on request."""
    with st.expander(t("detectors_title")):
        st.caption(t("detectors_caption"))
        bench = workbench()
        scores = head_work.detector_scores(bench, name)
        if scores is None:
            scores = heavy_action("detectors_run", t("detectors_run"), (name,),
                                  lambda job: head_work.detect(bench, model, name, progress=job.progress),
                                  lambda done, total: t("detectors_progress", done=done, total=total))
            if scores is None:
                return
            st.rerun()  # the whole page: the head profile above shows the new scores too
        # One grid a row, the page's whole width: three side by side left the numbers about 5 px high.
        for detector, grid in scores.items():
            figure = plots.score_grid(grid, t(f"detector_{detector}"), text=plot_text())
            head_grid(st, figure, f"detector_{detector}", in_fragment=True)
        if figure.layout.meta["values"] == "hover":
            st.caption(t("grid_values_hover"))
