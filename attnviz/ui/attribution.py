"""The Explore page's direct logit attribution (readouts.attribution): a layers x heads grid of each
head's direct contribution to the target's logit (minus a contrast's) in a diverging scale, clickable to the
head, the MLPs beside it, the rule in words, and what the selected head promotes and suppresses."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis.views import visible_token
from attnviz.plots import readout as figures
from attnviz.ui.focus import focus
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.readout import computed, opening, token_box
from attnviz.ui.widgets import head_grid
from attnviz.workbench import readout as work


@st.fragment
@guarded
def attribution_section(model, source: str, text: str, trace, paired: bool) -> None:
    opened = opening(model, "dla_title", "dla_rule", paired, trace, source, text, "dla", n_columns=3)
    if opened is None:
        return
    where, (middle, right) = opened
    with middle:
        target = token_box(model, "readout_target", "dla_target", "readout_target_help")
    with right:
        contrast = token_box(model, "dla_contrast", "dla_contrast", "dla_contrast_help", field="contrast")
    bench = workbench()
    key = work.attribution_key(source, text, where, target, contrast)
    result = computed("dla_run", t("dla_run"), key,
                      lambda progress: work.attribution(bench, source, text, where, target, contrast, progress),
                      len(trace.tokens))
    if result is None:
        return
    if result.capped:
        st.caption(t("dla_capped"))
    if result.masked_lm:
        st.caption(t("dla_masked_lm"))
    roles = [t("readout_role_target")] + ([] if result.contrast_id is None else [t("readout_role_contrast")])
    scored = [visible_token(result.target_text), visible_token(result.contrast_text or "")][:len(roles)]
    st.dataframe({t("column_token"): scored,
                  t("readout_role"): roles}, hide_index=True, key="dla_tokens")
    line = "dla_value" if result.contrast_id is None else "dla_value_difference"
    st.markdown(t(line, value=result.value, embed=result.embed, heads=float(result.heads.sum()),
                  mlps=float(result.mlps.sum()), rest=result.rest))
    grid, column = st.columns([5, 1])
    head_grid(grid, plots.score_grid(result.heads, t("dla_grid_title"), diverging=True, text=plot_text()),
              key="dla_grid", in_fragment=True)
    column.plotly_chart(figures.layer_column(result.mlps, t("dla_mlps_title"), text=plot_text()), key="dla_mlps",
                        width="stretch")
    head_vocabulary(model, source, result, key)


def head_vocabulary(model, source: str, result, key: tuple) -> None:
    """The focus head's promoted and suppressed tokens at this position."""
    n_layers, n_heads = result.heads.shape
    layer = int(np.clip(focus().layer, 0, n_layers - 1))
    head = int(np.clip(focus().head, 0, n_heads - 1))
    tokens = work.head_tokens(workbench(), source, result, key, layer, head)
    st.markdown(t("dla_head_title", layer=layer, head=head, value=float(result.heads[layer, head])))
    up, down = st.columns(2)
    for column, title, rows, key in ((up, "dla_promoted", tokens.promoted, "dla_up"),
                                     (down, "dla_suppressed", tokens.suppressed, "dla_down")):
        column.markdown(t(title))
        column.dataframe({t("column_token"): [visible_token(text) for _, text, _ in rows],  # spaces as ␣
                          t("dla_change"): [round(v, 3) for _, _, v in rows]}, hide_index=True, key=key)
