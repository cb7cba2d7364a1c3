"""Heavy actions in threads of their own, which stop at their next progress step when told to.

A heavy action run in a visitor's script thread cannot be cancelled from the page: Streamlit queues a click
inside a running fragment until the fragment has finished (a 270-head scan ran on to the end after Cancel
at 14). So the work runs in a Job's own thread, and the page only draws its progress. The work calls
`job.progress(done, total)` (or `job.check()`) between steps; that raises Cancelled once the visitor pressed
Cancel, or once no page has shown the job for HEARTBEAT_S: the tab closed, or a rerun with other inputs no
longer draws it.

On a shared host a job also stops once it has held its slot for JOB_LIMIT_S (raising TooLong): with one slot
(workbench.slots), a 10.5 MB treebank on a Findings card held every other visitor's heavy view for 18 min."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable

from attnviz.workbench.memory import VISITOR
from attnviz.workbench.slots import HeavySlots

log = logging.getLogger(__name__)

# A job no page has drawn for this long is cancelled. The page redraws it every POLL_S, and every script run
# of its session touches it at the start (a slow full rerun, waiting for a slot or the budget, does not
# reach the drawing for a while).
HEARTBEAT_S = 15.0
KEEP_FINISHED_S = 120.0  # a finished job nobody came back for is dropped after this

# How long a job may hold its slot on a host whose memory budget comes from a container or a setting (the
# public host: workbench.memory.Budget.basis), counted from when it got the slot. The app's own inputs run
# well within it (the Findings cards on their bundled data, a scan, the detectors); an upload large enough to
# take longer is the command line's work. On a person's own machine ("machine") nobody else waits: no bound.
JOB_LIMIT_S = 180.0
LIMIT_VARIABLE = "ATTNVIZ_JOB_LIMIT_S"  # seconds, anywhere; 0 = no bound
BOUNDED_BASES = ("container", "setting")


def job_limit_s(basis: str, environ=os.environ) -> float | None:
    """The bound on one job's time in its slot, or None: ATTNVIZ_JOB_LIMIT_S when set (a malformed or negative
    setting is an error, not a silent default), else JOB_LIMIT_S where the budget's basis is a shared host's."""
    raw = environ.get(LIMIT_VARIABLE, "").strip()
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            raise ValueError(f"{LIMIT_VARIABLE} must be a number of seconds, got {raw!r}") from None
        if not seconds >= 0:
            raise ValueError(f"{LIMIT_VARIABLE} must be 0 (no limit) or more, got {raw!r}")
        return seconds or None
    return JOB_LIMIT_S if basis in BOUNDED_BASES else None


class Cancelled(Exception):
    """The visitor cancelled the action, or left it (the tab closed, the page moved on)."""


class TooLong(Cancelled):
    """The job held its slot past the host's bound (`limit_s`); a Cancelled, so work that tidies up on
    Cancelled does the same."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        super().__init__(f"stopped after {limit_s:g} s")


class Job:
    def __init__(self, key: Hashable, session_id: str, clock: Callable[[], float] = time.monotonic,
                 limit_s: float | None = None) -> None:
        self.key, self.session_id, self._clock, self.limit_s = key, session_id, clock, limit_s
        self.done, self.total = 0, 0
        self.waiting = True  # for a heavy-work slot
        self.ahead: int | None = None  # while waiting: the tasks that start before this one (None: not yet known)
        self.started_at: float | None = None  # when it got its slot: the bound counts from there
        self.result = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._cancelled = threading.Event()
        self.seen_at = self.finished_at = clock()

    def seen(self) -> None:
        """A page has just drawn this job: keep it alive."""
        self.seen_at = self._clock()

    def cancel(self) -> None:
        self._cancelled.set()

    def check(self) -> None:
        """Raise Cancelled if the job was cancelled or left, TooLong past its bound; the work calls it between
        steps."""
        now = self._clock()
        if not self._cancelled.is_set() and now - self.seen_at > HEARTBEAT_S:
            self._cancelled.set()
        if self._cancelled.is_set():
            raise Cancelled()
        if self.limit_s is not None and self.started_at is not None and now - self.started_at > self.limit_s:
            raise TooLong(self.limit_s)

    def queued(self, ahead: int) -> None:
        """The slot's waiting step: note the place in the queue, then stop here if cancelled."""
        self.ahead = ahead
        self.check()

    def progress(self, done: int, total: int) -> None:
        """The work's progress callback: record the step, then stop here if cancelled."""
        self.done, self.total = done, total
        self.check()


class Jobs:
    """The process's running and finished jobs, by key (the caller puts the visitor's session in it)."""

    def __init__(self, slots: HeavySlots, clock: Callable[[], float] = time.monotonic, basis: str = "machine",
                 environ=os.environ, serve: Callable[[str], None] = VISITOR.set) -> None:
        """`basis`: the memory budget's (Workbench.budget_rule.basis), which says whether jobs are bounded;
        `serve(session_id)`: what a job's thread does first, to compute for that visitor (Workbench.serve)."""
        self._slots, self._clock, self._serve = slots, clock, serve
        self.limit_s = job_limit_s(basis, environ)
        self._jobs: dict[Hashable, Job] = {}
        self._lock = threading.Lock()

    def start(self, key: Hashable, session_id: str, work: Callable[[Job], object]) -> Job:
        """`work(job)` in a new thread, inside one of the heavy-work slots (waiting for it is cancellable
        too); the job already running under `key`, if there is one."""
        with self._lock:
            self._drop_stale()
            job = self._jobs.get(key)
            if job is not None and not job.finished.is_set():
                return job
            job = self._jobs[key] = Job(key, session_id, self._clock, self.limit_s)
        threading.Thread(target=self._run, args=(job, work), name=f"attnviz-job-{session_id}", daemon=True).start()
        return job

    def _run(self, job: Job, work: Callable[[Job], object]) -> None:
        self._serve(job.session_id)  # this thread computes for that visitor, under the Workbench's ceiling
        try:
            with self._slots.hold(job.session_id, waiting=job.queued):
                job.started_at = self._clock()
                job.waiting = False
                job.check()  # cancelled while it waited for the slot's last step
                job.result = work(job)
        except Exception as error:  # the page shows it (Cancelled, Busy, OverBudget, bad input, the unforeseen)
            if isinstance(error, TooLong):  # what the host's operator may want to know of: which work, how big
                log.info("job %r stopped after its %g s bound", job.key, error.limit_s)
            elif not isinstance(error, Cancelled):  # the page says which; the log keeps the traceback
                log.warning("job %r ended with %s", job.key, type(error).__name__, exc_info=error)
            # Without its traceback: the frames it holds keep the work's arrays alive after its reservation.
            job.error = error.with_traceback(None)
        finally:
            job.finished_at = self._clock()
            job.finished.set()

    def get(self, key: Hashable) -> Job | None:
        with self._lock:
            self._drop_stale()
            return self._jobs.get(key)

    def touch_session(self, session_id: str) -> None:
        """A script run of this visitor has started: its jobs are still wanted."""
        with self._lock:
            for job in self._jobs.values():
                if job.session_id == session_id:
                    job.seen()

    def pop(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._jobs.pop(key, None)

    def running(self) -> list[Job]:
        with self._lock:
            self._drop_stale()
            return [job for job in self._jobs.values() if not job.finished.is_set()]

    def _drop_stale(self) -> None:
        now = self._clock()
        for key in [k for k, job in self._jobs.items()
                    if job.finished.is_set() and now - job.finished_at > KEEP_FINISHED_S]:
            del self._jobs[key]
