"""The next-token predictions of a decoder, at a position the visitor picks, for a full or a long text
(the Explore page)."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis.views import visible_token
from attnviz.ui.common import guarded, t, workbench
from attnviz.ui.widgets import position_input
from attnviz.workbench import traces


@st.fragment
@guarded
def next_token_predictions(model, trace_key, long: bool = False) -> None:
    if not model.info.causal or model.module.lm_head is None:
        return
    trace = traces.held_reduced(workbench(), *trace_key) if long else traces.trace(workbench(), *trace_key)
    if trace is None or trace.hidden is None:
        return
    st.subheader(t("predictions"))
    position = position_input(t("position"), trace, "prediction_position", len(trace.tokens) - 1)
    rows = model.next_tokens(trace, position)
    st.dataframe({t("column_token"): [visible_token(text, model.token_bytes(i)) for text, _, i in rows],
                  t("column_probability"): [round(p, 4) for _, p, _ in rows]}, hide_index=True)
