"""What the Explore page's logit lens, attribution and routes sections share: the position and target
widgets, the note for a model without a head, and the rule that a short text's result is computed on every
Enter while a long one waits for its button (workbench.readout.SHORT_TOKENS; ui/heavy.py)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attnviz.analysis.views import visible_token
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, follow_focus_change, use
from attnviz.ui.guard import refused, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.tokens import spaced_alternative
from attnviz.ui.url_state import MAX_TOKEN_TEXT
from attnviz.ui.widgets import position_input
from attnviz.workbench import readout as work


def readable(model, paired: bool) -> bool:
    """Whether the views can read this model and input (one text, and a decoder's LM head or an encoder's
    masked-LM head); says why not."""
    if paired:
        st.info(t("readout_one_text"))
        return False
    if model.module.lm_head is not None or getattr(model.module, "mlm_head", None) is not None:
        return True
    st.info(t("readout_needs_head"))
    return False


def opening(model, title_key: str, caption_key: str, paired: bool, trace, source: str, text: str, prefix: str,
            n_columns: int = 2):
    """A section's title and note, then, where the model and input can be read, (the position picked in the
    first of `n_columns` columns, the other columns); else None (said why)."""
    st.subheader(t(title_key))
    st.caption(t(caption_key))
    if not readable(model, paired):
        return None
    columns = st.columns(n_columns)
    with columns[0]:
        where = position(trace, source, text, prefix)
    return where, columns[1:]


def position(trace, source: str, text: str, prefix: str) -> int:
    """The focus's read position; while it has none (and after another text: ui/focus.set_focus), the last
    token (an encoder's mask: readouts.recorded_run.default_position), as a lens is read at the prediction
    in TransformerLens and the LLM Transparency Tool."""
    default = work.default_position(workbench(), source, text)
    return position_input(t("readout_position"), trace, f"{prefix}_position", default)


def token_box(model, label_key: str, key: str, help_key: str, field: str = "target", container=st) -> str | None:
    """The focus's target (or contrast, `field`) token, typed as text (' are', its leading space kept), or
    None when the box is empty. Typed once, it is the same in every view that reads one."""
    typed = container.text_input(t(label_key), help=t(help_key), max_chars=MAX_TOKEN_TEXT, **bound(key, field))
    spaced_hint(model, typed, field, key, container)
    follow_focus_change()
    return typed or None


def spaced_hint(model, typed: str | None, field: str, key: str, container=st) -> None:
    """Under a token box: "are" typed where the model's word is " are" says so and offers the spaced token
    (a word inside a sentence is the spaced one for a byte-level BPE; the other is another logit)."""
    spaced = spaced_alternative(model, typed)
    if spaced is None:
        return
    container.caption(t("token_unspaced", typed=md(typed), spaced=md(visible_token(spaced))))
    container.button(t("token_use_spaced", spaced=md(visible_token(spaced))), key=f"{key}_spaced", on_click=use,
                     args=(field, spaced))


def computed(button_key: str, label: str, key: tuple, compute: Callable, n_tokens: int):
    """The result under `key`: held already, computed now for a short text, or on the button for a long one
    (`compute(progress)`); None when not there (refused, failed or not started: said so)."""
    done = work.held(workbench(), key)
    if done is not None:
        return done
    if work.is_short(n_tokens):
        try:
            with refused():
                return compute(None)
        except ValueError as error:  # a target of several tokens, a position outside the text
            st.warning(md(error))
        return None
    return heavy_action(button_key, label, key[1:], lambda job: compute(job.progress),
                        lambda done, total: t("readout_progress"))


