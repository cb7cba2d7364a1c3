"""The Explore page's estimate of activation patching (interventions.attribution_patching): every head and MLP of
the pair from one forward and one backward pass, drawn before the exact grids (which cost L x H patched runs), with
how far each grid can be trusted, its agreement with the exact grid once that is computed, and a button that patches
the estimate's top heads exactly (k runs). Computed by workbench.patching and shared."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.plots.patching import layer_column
from attnviz.ui.escape import md
from attnviz.ui.guard import public_message, refused, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.widgets import head_grid, head_table
from attnviz.workbench import patching as work

CHECK_TOP = 10  # heads checked exactly: what the estimate's top 10 overlap is measured on


def estimate_section(model, inputs: tuple, exact) -> None:
    """`inputs`: (source, clean, corrupt, target, contrast, direction), as the exact patching's; `exact`: its
    PatchResult where computed (None: not yet)."""
    bench = workbench()
    st.markdown(t("patch_est_title"))
    estimate = None
    with refused():  # a full budget says so here, and the exact section below still draws
        try:
            estimate = work.estimate(bench, model, *inputs)
        except ValueError as error:  # both runs score the same: nothing to estimate (the exact section says why)
            st.warning(t("patch_refused", error=md(public_message(error, inputs[0]))))
    if estimate is None:
        return
    st.caption(t("patch_est_caption"))
    text = plot_text()
    grid_col, mlp_col = st.columns([4, 1])
    figure = plots.score_grid(np.asarray(estimate.heads), t("patch_est_heads_title"), diverging=True, text=text)
    head_grid(grid_col, figure, "patch_est_grid", in_fragment=True)
    mlp_col.plotly_chart(layer_column(np.asarray(estimate.mlps), t("patch_est_mlps_title"), text),
                         key="patch_est_mlps", width="stretch")
    st.caption(t("patch_est_trust"))
    if exact is not None:
        heads = work.agreement(estimate.heads, exact.heads, CHECK_TOP)
        mlps = work.agreement(estimate.mlps, exact.mlps, 3)
        residual = work.agreement(estimate.residual, exact.residual, CHECK_TOP)
        st.caption(t("patch_est_agreement", heads_r=heads.r, heads_top=heads.overlap, k=heads.k,
                     mlps_r=mlps.r, residual_r=residual.r, residual_top=residual.overlap, rk=residual.k))
    _check(model, inputs)


def _check(model, inputs: tuple) -> None:
    """The estimate's top heads patched exactly, as a table beside their estimates."""
    bench = workbench()
    checked = work.checked_result(bench, *inputs, CHECK_TOP)
    if checked is None:
        checked = heavy_action(
            "patch_est_check", t("patch_est_check", k=CHECK_TOP), inputs,
            lambda job: work.check_top(bench, model, *inputs, CHECK_TOP, progress=job.progress),
            lambda done, total: t("patch_progress", done=done, total=total))
        if checked is None:
            return
    both = work.agreement(checked.approx, checked.exact, len(checked.cells))
    st.caption(t("patch_est_checked", k=len(checked.cells), r=both.r))
    head_table(st, {t("patch_est_column_head"): [f"L{layer} H{head}" for layer, head in checked.cells],
                    t("patch_est_column_estimate"): [round(float(v), 4) for v in checked.approx],
                    t("patch_est_column_exact"): [round(float(v), 4) for v in checked.exact]},
               [(int(layer), int(head)) for layer, head in checked.cells], "patch_est_table")
