"""Heavy actions in threads of their own, which stop at their next progress step when told to.

A heavy action run in a visitor's script thread cannot be cancelled from the page: Streamlit queues a click
inside a running fragment until the fragment has finished (a 270-head scan ran on to the end after Cancel
at 14). So the work runs in a Job's own thread, and the page only draws its progress. The work calls
`job.progress(done, total)` (or `job.check()`) between steps; that raises Cancelled once the visitor pressed
Cancel, or once no page has shown the job for HEARTBEAT_S: the tab closed, or a rerun with other inputs no
longer draws it."""

from __future__ import annotations

import logging
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


class Cancelled(Exception):
    """The visitor cancelled the action, or left it (the tab closed, the page moved on)."""


class Job:
    def __init__(self, key: Hashable, session_id: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.key, self.session_id, self._clock = key, session_id, clock
        self.done, self.total = 0, 0
        self.waiting = True  # for a heavy-work slot
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
        """Raise Cancelled if the job was cancelled or left; the work calls it between steps."""
        if not self._cancelled.is_set() and self._clock() - self.seen_at > HEARTBEAT_S:
            self._cancelled.set()
        if self._cancelled.is_set():
            raise Cancelled()

    def progress(self, done: int, total: int) -> None:
        """The work's progress callback: record the step, then stop here if cancelled."""
        self.done, self.total = done, total
        self.check()


class Jobs:
    """The process's running and finished jobs, by key (the caller puts the visitor's session in it)."""

    def __init__(self, slots: HeavySlots, clock: Callable[[], float] = time.monotonic) -> None:
        self._slots, self._clock = slots, clock
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
            job = self._jobs[key] = Job(key, session_id, self._clock)
        threading.Thread(target=self._run, args=(job, work), name=f"attnviz-job-{session_id}", daemon=True).start()
        return job

    def _run(self, job: Job, work: Callable[[Job], object]) -> None:
        VISITOR.set(job.session_id)  # this thread computes for that visitor
        try:
            with self._slots.hold(job.session_id, waiting=job.check):
                job.waiting = False
                job.check()  # cancelled while it waited for the slot's last step
                job.result = work(job)
        except Exception as error:  # the page shows it (Cancelled, Busy, OverBudget, bad input, the unforeseen)
            if not isinstance(error, Cancelled):  # the page says which; the log keeps the traceback
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
