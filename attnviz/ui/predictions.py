"""The next-token predictions of a decoder, at a position the visitor picks, for a full or a long text
(the Explore page). A predicted piece of a character ("⟨e4 bb⟩") also shows the character(s) the model's own
next tokens complete it to (workbench.completion), its exact bytes beside them."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis.views import visible_token
from attnviz.ui.guard import guarded, over_budget_message, workbench
from attnviz.ui.language import t
from attnviz.ui.widgets import position_input
from attnviz.workbench import OverBudget, completion, shelf, traces


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
    shown = [visible_token(text, model.token_bytes(i)) for text, _, i in rows]
    pieces = [i for (text, _, i), cell in zip(rows, shown) if cell != text and cell.startswith("⟨")]
    lead, done = b"", {}
    if pieces and position < shelf.FULL_MAPS_TOKENS:  # past it, the prefix pass alone would be a long run
        try:
            lead, done = completion.completions(workbench(), trace_key[0], list(trace.input_ids), position, pieces)
        except OverBudget as error:
            st.caption(over_budget_message(error))
    cells = [completed_cell(model, cell, done.get(i), lead) for (_, _, i), cell in zip(rows, shown)]
    st.dataframe({t("column_token"): cells, t("column_probability"): [round(p, 4) for _, p, _ in rows]},
                 hide_index=True)
    if pieces:
        say = ("next_token_far" if position >= shelf.FULL_MAPS_TOKENS else "next_token_completed"
               if any(done.get(i) for i in pieces) else "next_token_not_completed")
        st.caption(t(say, steps=completion.COMPLETION_STEPS, full=shelf.FULL_MAPS_TOKENS))


def completed_cell(model, cell: str, done, lead: bytes) -> str:
    """A row's token cell: "他 ⟨e4 bb⟩ + ⟨96⟩" (the characters, the predicted piece, the tokens after it), with
    the text's own unfinished bytes first in parentheses, "他 (⟨e4 bb⟩) ⟨96⟩"; the piece alone when it was not
    completed."""
    if done is None:
        return cell
    text, after = done
    own = f"({visible_token(chr(0xFFFD), lead)}) " if lead else ""
    return f"{text} {own}{cell}" + "".join(f" + {visible_token(chr(0xFFFD), model.token_bytes(i))}" for i in after)
