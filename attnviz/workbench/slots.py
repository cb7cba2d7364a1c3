"""The heavy-work slots: at most HEAVY_SLOTS heavy actions (parity, scoring, scans, detectors, translations)
at once in the process and one per visitor, so that on a shared CPU every light visitor's rerun stays fast.
Visitors waiting for a slot queue for it, first come first served, and each is told how many tasks are
ahead of theirs. Loads take no slot: they wait only for another load of the same source (Workbench.load_lock).

One slot on the public host: two heavy actions on its shared CPU would each take twice as long, and its
2.7 GB hold one long action's transient memory, not two. What keeps one visitor's long action from holding
every other one for minutes is the time bound of a job on that host (workbench.jobs, JOB_LIMIT_S)."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable

HEAVY_SLOTS = 1
WAIT_STEP_S = 0.5  # how often a waiting visitor is told it is still waiting (and may cancel)


class Busy(Exception):
    """This visitor already runs a heavy action."""


class HeavySlots:
    def __init__(self, slots: int = HEAVY_SLOTS) -> None:
        self._slots, self._holders = slots, 0
        self._sessions: set[str] = set()  # holding or waiting: one slot per visitor
        self._queue: deque[str] = deque()  # the waiting sessions, first come first served
        self._changed = threading.Condition()  # a slot freed, or the queue moved

    @contextlib.contextmanager
    def hold(self, session_id: str, waiting: Callable[[int], None] | None = None):
        """Hold one slot while the block runs; Busy when `session_id` already holds or waits for one.
        While others are served first, `waiting(ahead)` is called every WAIT_STEP_S and whenever the queue
        moves, `ahead` being the tasks that start before this one (those running and those queued earlier):
        the page shows that it waits there, and a cancellation raised there leaves the queue."""
        with self._changed:
            if session_id in self._sessions:
                raise Busy()
            self._sessions.add(session_id)
            self._queue.append(session_id)
        try:
            self._wait_turn(session_id, waiting)
            try:
                yield
            finally:
                with self._changed:
                    self._holders -= 1
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._sessions.discard(session_id)
                if session_id in self._queue:  # left while waiting: the ones behind move up
                    self._queue.remove(session_id)
                    self._changed.notify_all()

    def _wait_turn(self, session_id: str, waiting: Callable[[int], None] | None) -> None:
        while True:
            with self._changed:
                if self._take(session_id):
                    return
                self._changed.wait(WAIT_STEP_S)
                if self._take(session_id):
                    return
                ahead = self._holders + self._queue.index(session_id)
            if waiting is not None:  # outside the lock: it draws on a page, or raises to leave the queue
                waiting(ahead)

    def _take(self, session_id: str) -> bool:
        """Under the lock: take a slot if one is free and this session is first in the queue."""
        if self._holders < self._slots and self._queue[0] == session_id:
            self._queue.popleft()
            self._holders += 1
            self._changed.notify_all()  # with a slot still free, the next one need not wait a step
            return True
        return False
