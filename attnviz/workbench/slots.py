"""The heavy-work slots: at most HEAVY_SLOTS heavy actions (parity, scoring, scans, detectors, translations)
at once in the process and one per visitor, so that on a shared CPU every light visitor's rerun stays fast.
Loads take no slot: they wait only for another load of the same source (Workbench.load_lock)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

HEAVY_SLOTS = 1
WAIT_STEP_S = 0.5  # how often a waiting visitor is told it is still waiting (and may cancel)


class Busy(Exception):
    """This visitor already runs a heavy action."""


class HeavySlots:
    def __init__(self, slots: int = HEAVY_SLOTS) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        self._sessions: set[str] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, session_id: str, waiting: Callable[[], None] | None = None):
        """Hold one slot while the block runs; Busy when `session_id` already holds or waits for one.
        `waiting()` is called every WAIT_STEP_S while the slot is taken: the page shows that it waits there,
        and a cancellation check there ends the wait."""
        with self._lock:
            if session_id in self._sessions:
                raise Busy()
            self._sessions.add(session_id)
        try:
            while not self._slots.acquire(timeout=WAIT_STEP_S):
                if waiting is not None:
                    waiting()
            try:
                yield
            finally:
                self._slots.release()
        finally:
            with self._lock:
                self._sessions.discard(session_id)
