"""A heavy action on the page: a button starts it in a thread of its own (workbench.jobs), a progress bar
and a Cancel button redraw every POLL_S while it runs, and the result is handed back once it has finished.
Cancel, closing the tab, or a rerun that no longer draws the action stops it at its next progress step; so
does a shared host's bound on a job's time (workbench.jobs.TooLong), which the page explains. While it waits
for the heavy-work slot, the bar says how many tasks are ahead of it."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from attnviz.ui.escape import md
from attnviz.ui.guard import over_budget_message, public_message, session_id, waiting_text, workbench
from attnviz.ui.language import t
from attnviz.workbench import Busy, Cancelled, OverBudget, TooLong

POLL_S = 0.5


def heavy_action(button_key: str, label: str, inputs: tuple, work: Callable, step_text: Callable[[int, int], str],
                 *, primary: bool = False, autostart: bool = False):
    """`work(job)` run as this visitor's job under (button_key, *inputs); `job.progress(done, total)` is its
    progress callback. Returns the result when the job has just finished, else None (not started, running,
    or ended without one, having said why). `autostart`: started without a click (what the page cannot draw
    without it, as a long text's trace), except after it was cancelled or failed for these inputs: then the
    button starts it again."""
    jobs = workbench().jobs
    key = (session_id(), button_key, *inputs)
    job = jobs.get(key)
    if job is not None and job.finished.is_set():
        jobs.pop(key)
        if job.error is None:
            return job.result
        _explain(job.error)  # then the button again, to start over
        st.session_state[f"_{button_key}_stopped"] = key  # ... and no start by itself for these inputs
        job = None
    if job is None:
        by_itself = autostart and st.session_state.get(f"_{button_key}_stopped") != key
        if not by_itself and not st.button(label, key=button_key, type="primary" if primary else "secondary"):
            return None
        st.session_state.pop(f"_{button_key}_stopped", None)
        job = jobs.start(key, session_id(), work)
    job.seen()
    _progress(key, button_key, step_text)
    return None


def _explain(error: Exception) -> None:
    if isinstance(error, TooLong):  # before Cancelled, which it is
        st.warning(too_long_message(error))
    elif isinstance(error, Cancelled):
        st.info(t("cancelled"))
    elif isinstance(error, Busy):
        st.warning(t("busy"))
    elif isinstance(error, OverBudget):
        st.error(over_budget_message(error))
    elif isinstance(error, ValueError):  # refused input (too long, unsupported): its message names the reason
        st.warning(t("heavy_failed", error=md(public_message(error, ""))))
    else:  # its traceback went to the server's log when the job ended (workbench.jobs)
        st.error(t("unexpected_error"))


def too_long_message(error: TooLong) -> str:
    """Why the job stopped (the shared host's bound, so that others are not kept waiting) and where it runs
    unbounded."""
    return t("heavy_too_long", minutes=round(error.limit_s / 60, 1))


@st.fragment(run_every=POLL_S)
def _progress(key: tuple, button_key: str, step_text: Callable[[int, int], str]) -> None:
    """The running job's bar and Cancel button, redrawn every POLL_S on its own: a click here is not queued
    behind the work, which runs in another thread. When the job ends, the page reruns to draw the result."""
    job = workbench().jobs.get(key)
    if job is None or job.finished.is_set():
        st.rerun()
    job.seen()
    if job.waiting:
        st.progress(0.0, text=waiting_text(job.ahead))
    else:
        st.progress(job.done / job.total if job.total else 0.0,
                    text=step_text(job.done, job.total) if job.total else t("heavy_starting"))
    if st.button(t("cancel"), key=f"{button_key}_cancel"):
        job.cancel()
        st.caption(t("cancelling"))
