"""What stands between a page and the server: the process's one Workbench, this visitor's heavy-work slot,
`guarded` (no traceback reaches a page), the refusals (busy, over budget) and messages with no server path."""

from __future__ import annotations

import contextlib
import functools
import logging
import re

# Imported here, before any page runs: Streamlit and plotly import pandas lazily, and two sessions doing
# that at once saw a partially initialised module ("'pandas' has no attribute 'Series'", in a load test).
import pandas  # noqa: F401
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attnviz.ui.escape import md
from attnviz.ui.language import t
from attnviz.workbench import Busy, OverBudget, Workbench
from attnviz.workbench.shared import IN_USE_S

log = logging.getLogger(__name__)


# An absolute path in a message (a cache folder, a resolved model folder): never shown to visitors.
_SERVER_PATH = re.compile(r"(?<![\w.:/-])(?:~|[A-Za-z]:)?[/\\][^\s'\"),;]+")


@st.cache_resource(show_spinner=False)
def workbench() -> Workbench:
    """The process's one Workbench (attnviz.workbench): every session's models, traces and views, under one
    memory budget. st.cache_resource shares it as it is: never pickled or copied per read (st.cache_data
    would copy a 140 MB trace on every rerun)."""
    return Workbench()


@contextlib.contextmanager
def heavy_slot():
    """This visitor's heavy-work slot (workbench.slots); while others hold the process's slots the page says
    it waits and its place in the queue, and each of those calls is a point where a rerun by this visitor
    stops the wait."""
    waiting = st.empty()
    with workbench().slots.hold(session_id(), waiting=lambda ahead: waiting.caption(waiting_text(ahead))):
        waiting.empty()
        yield


def waiting_text(ahead: int | None) -> str:
    """What a visitor waiting for a heavy-work slot reads: how many tasks start before theirs, once known."""
    if ahead is None:
        return t("waiting_slot")
    return t("waiting_slot_next") if ahead <= 1 else t("waiting_slot_queue", ahead=ahead)


def guarded(render):
    """`render` (a page or a fragment) with every unforeseen error turned into a short message, its
    traceback going to the server's log only. `client.showErrorDetails = "none"` does the same, but
    Community Cloud overrides that setting with one that shows tracebacks. Streamlit's own rerun and
    stop signals are BaseExceptions and pass through."""

    @functools.wraps(render)
    def run(*args, **kwargs):
        # whose results the stores hold (workbench.memory.VISITOR), spending under the one ceiling
        workbench().serve(session_id())
        workbench().jobs.touch_session(session_id())  # this visitor's running heavy actions are still wanted
        try:
            with refused():  # e.g. a fragment's trace was evicted since the page drew, and is refused now
                return render(*args, **kwargs)
        except Exception:
            log.exception("unexpected error in %s", render.__qualname__)
            st.error(t("unexpected_error"))

    return run


@contextlib.contextmanager
def refused(model: str | None = None):
    """The one place a page says that work was refused: this visitor already has a heavy action running
    (Busy), or it does not fit the memory budget (OverBudget; naming `model` when the work was that model's
    own load or run). Either ends the block, and what follows it runs on."""
    try:
        yield
    except Busy:
        st.warning(t("busy"))
    except OverBudget as error:
        st.error(over_budget_message(error, model))


def over_budget_message(error, model: str | None = None) -> str:
    """Markdown, the model's name escaped: the model does not fit, or (no `model`) this input does not now."""
    if model is not None:  # what it would take: others' models let go, or a larger budget
        sizes = dict(name=md(model), need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9)
        if error.waiting_helps:
            return t("over_budget_wait", **sizes, minutes=round(IN_USE_S / 60),
                     models=", ".join(md(other) for other in sorted(error.others)))
        return t("over_budget", **sizes)
    return t("trace_over_budget", need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9)


def session_id() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def public_message(error: Exception, name: str, location: str | None = None) -> str:
    """`error` as a visitor may read it: what they typed stands where the server's path was, and any
    other absolute path (a cache folder) is cut out."""
    text = str(error).split("\n")[0]
    if location and location != name:
        text = text.replace(location, name)
    return _SERVER_PATH.sub("…", text)
