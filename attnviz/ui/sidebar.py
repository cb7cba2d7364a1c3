"""The sidebar every page draws: language, model picker, the model's facts and the memory budget in force."""

from __future__ import annotations

import streamlit as st

from attnviz.ui.guard import workbench
from attnviz.ui.language import language_switch, t
from attnviz.ui.model_choice import get_model, model_facts, pick_model_source
from attnviz.ui.url_state import restore_from_url


def sidebar():
    """Language, model picker, model facts and the memory budget. Returns (model or None, source shown). The
    language and the model asked for are the focus's (ui/focus.py): the same on every page, and in the link
    even while another model is shown in its place (said so in the main area)."""
    restore_from_url()
    language_switch()
    source = pick_model_source()
    model, shown = get_model(source)
    if model is not None:
        model_facts(model)
    budget_note()
    return model, shown


def budget_note() -> None:
    """Which memory budget is in force, and why (workbench.memory.budget_in_force)."""
    rule = workbench().budget_rule
    st.sidebar.caption(t(f"budget_{rule.basis}", budget=rule.bytes / 1e9, of=rule.of / 1e9))
