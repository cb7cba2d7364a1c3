"""The focus: the one question a visitor is asking (model, text, second text, read position, layer, head,
target and contrast tokens, language), shared by every view on every page and kept in the link.

It lives in session state under one key that no widget owns: Streamlit forgets the state of widgets a page
does not draw, so a value kept only in a widget key was lost on the way to another page and back. Widgets
that show a part of the focus are *bound* to it (`bound`): drawn with the focus's value, and writing their
new value back to the focus when the visitor changes them. Pages never talk to each other, only to the focus.
The link is written from the focus at the end of every run (`to_link`), whatever the page, because Streamlit
clears the query string when the visitor changes page."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attnviz.ui.url_state import QUERY_KEYS, write_url
from attnviz.workbench import shelf

DEFAULT_TEXT = "The keys to the cabinet are on the table."


@dataclasses.dataclass(frozen=True)
class Focus:
    """What a visitor is asking about. `model` None: the app's default model; `pos` None: each view's default
    read position (a decoder's last token, an encoder's mask); `target`/`contrast` "": each view's default."""

    model: str | None = None
    text: str = DEFAULT_TEXT
    text_b: str = ""
    pos: int | None = None
    layer: int = 0
    head: int = 0
    target: str = ""
    contrast: str = ""
    lang: str = "en"

    def label(self) -> str:
        """The focus head as every view writes it."""
        return head_label(self.layer, self.head)


FIELDS = tuple(field.name for field in dataclasses.fields(Focus))  # each one is also its link key
_KEY = "_focus"  # the session-state key: no widget has it, so no page switch clears it
_CHANGED = "_focus_changed"  # set by a bound widget's callback: a fragment then reruns the whole page


def head_label(layer: int, head: int) -> str:
    """One head's label, the same in every grid, table and message: "L26 H0"."""
    return f"L{int(layer)} H{int(head)}"


def from_params(params) -> Focus:
    """The focus a link asks for: each key parsed by url_state's parser, a value that does not parse ignored."""
    values = {}
    params = {key: params[key] for key in params}
    # Keys of the same things before the focus: the minimal pair's second sentence, the query-key view's query.
    for old, new in (("compare", "text_b"), ("query", "pos")):
        if new not in params and old in params and QUERY_KEYS[old](params[old]) is not None:
            params[new] = params[old]
    for name in FIELDS:
        if name in params:
            value = QUERY_KEYS[name](params[name])
            if value is not None:
                values[name] = value
    return Focus(**values)


def to_params(focus: Focus, model_shown_by_default: str | None = None) -> dict:
    """The link's keys for `focus`: the model (once known) and the text always, every other field that differs
    from its default, None for the others (write_url removes them). A text too long for a link is left out."""
    default = Focus()
    params = {name: (getattr(focus, name) if getattr(focus, name) != getattr(default, name) else None)
              for name in FIELDS}
    params["model"] = focus.model or model_shown_by_default
    params["text"] = focus.text  # always: a permalink must not depend on this version's example sentence
    for name in ("text", "text_b", "target", "contrast"):
        if params[name] is not None and QUERY_KEYS[name](params[name]) is None:
            params[name] = None
    return params


def focus() -> Focus:
    """The session's focus: from the link on a session's first run, then whatever views made of it."""
    if _KEY not in st.session_state:
        st.session_state[_KEY] = from_params(st.query_params)
    return st.session_state[_KEY]


def set_focus(**changes) -> Focus:
    """Change parts of the focus. Another text, or another model, starts from each view's default position
    (a position is an index into one text's tokens)."""
    current = focus()
    changed = {name: value for name, value in changes.items() if getattr(current, name) != value}
    if not changed:
        return current
    if ({"text", "text_b", "model"} & changed.keys()) and "pos" not in changed:
        changed["pos"] = None
    st.session_state[_KEY] = dataclasses.replace(current, **changed)
    return st.session_state[_KEY]


def to_link() -> None:
    """Write the focus into the link (every page does, at the end of its run: `linked`)."""
    params = to_params(focus(), shelf.default_model())
    if params.get("text") == "":  # an emptied sentence box stays empty, not the example again (write_url drops "")
        st.query_params["text"] = ""
        params.pop("text")
    write_url(**params, compare=None)  # the minimal pair's old key: read once as text_b, then gone


def linked(render: Callable) -> Callable:
    """A page's body that writes the focus into the link when it ends, however it ends (a stop, a rerun)."""
    @functools.wraps(render)
    def run(*args, **kwargs):
        try:
            return render(*args, **kwargs)
        finally:
            to_link()
    return run


def _written_back(key: str, field: str, convert: Callable) -> None:
    """A bound widget's callback (it runs before the rerun): its new value into the focus."""
    set_focus(**{field: convert(st.session_state[key])})
    st.session_state[_CHANGED] = True


def use(field: str, value) -> None:
    """A button's callback that sets one part of the focus (a suggested token, a best head): every view
    follows, a fragment's button included."""
    set_focus(**{field: value})
    st.session_state[_CHANGED] = True


def bound(key: str, field: str, shown=None, convert: Callable = lambda value: value) -> dict:
    """Before widget `key` is drawn: give it the focus's `field` (or `shown`, the focus's value as the widget
    holds it); returns the keyword arguments (key, on_change, args) that make the widget write its changes
    back into the focus. Every widget that shows a part of the focus is drawn with them."""
    # Assigned on every run, equal or not: on another page the widget is a new one (Streamlit keys widgets by
    # page), which the key's old value would not reach.
    st.session_state[key] = getattr(focus(), field) if shown is None else shown
    return {"key": key, "on_change": _written_back, "args": (key, field, convert)}


def follow_focus_change() -> None:
    """Inside a fragment, after its bound widgets: a change of the focus there reruns the whole page, so
    every view follows it (a fragment's own rerun redraws only the fragment)."""
    ctx = get_script_run_ctx()
    if st.session_state.pop(_CHANGED, False) and ctx is not None and ctx.fragment_ids_this_run:
        st.rerun()


def full_run_started() -> None:
    """At the start of a full run: a change already seen by the whole page needs no further rerun."""
    st.session_state.pop(_CHANGED, None)
