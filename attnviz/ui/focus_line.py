"""The focus in one line, above the views that read it: the model the numbers are computed on, the read
position and its token, the head, the target and contrast. A visitor always sees what every view is about."""

from __future__ import annotations

import streamlit as st

from attnviz.analysis.views import token_labels, visible_token
from attnviz.ui.escape import md
from attnviz.ui.focus import focus
from attnviz.ui.language import t
from attnviz.ui.model_choice import asked_name, is_refused


def focus_line(model_shown: str, trace=None) -> None:
    """One caption: "Computed on M · read at 4 ␣cabinet · head L7 H5 · target ␣are − ␣is"; the position and
    its token where a trace gives them (a position outside the text reads as each view's default)."""
    now = focus()
    asked = now.model
    if asked and is_refused(asked.strip()):  # a fallback from a source never echoed (model_choice.asked_name)
        parts = [t("focus_model_refused", model=md(model_shown))]
    elif asked and asked.strip() != model_shown:  # a fallback: named here too, beside every view's numbers
        parts = [t("focus_model_instead", model=md(model_shown), asked=asked_name(asked.strip()))]
    else:
        parts = [t("focus_model", model=md(model_shown))]
    if trace is not None and now.pos is not None and 0 <= now.pos < len(trace.tokens):
        parts.append(t("focus_position", pos=now.pos, token=md(visible_token(token_labels(trace)[now.pos]))))
    else:
        parts.append(t("focus_position_default"))
    parts.append(t("focus_head", head=now.label()))
    if now.target:
        scored = visible_token(now.target) + (f" − {visible_token(now.contrast)}" if now.contrast else "")
        parts.append(t("focus_target", tokens=md(scored)))
    st.caption(" · ".join(parts))
