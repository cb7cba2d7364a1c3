"""The memory ceiling, kept where memory is spent.

A `Ceiling` is the process's ledger of its memory budget (attnviz.memory.budget): the bytes threads have reserved
ahead of their work (`reserve`, the app's Workbench making room by evicting caches and idle models, waiting for
other visitors' reservations to end). Estimates made ahead are guesses, and each new view got one wrong (issue 36:
a card's batch of 32 long sentences reached 4.4 GB under a 2.5 GB budget). So the places that allocate the large
tensors (the attention kernels' [B, H, T, S] buffers, the recorder's kept maps, a layer's activations, the
unembedding's logits) call `spending(nbytes)` from the shapes they are about to allocate, and a batch's size
follows from what is free (`fit`):

- **the backstop**: the process's real resident memory plus `nbytes` plus what *other* threads hold reserved must
  stay under the budget. Else room is made (caches, idle models), then other threads' reservations are waited for,
  then `OverBudget` stops the work with the figures, before the allocation, so that the host is never the one that
  fails;
- **the ledger**: what the spending thread's own reservation (`reserve`'s advance) does not cover is added to its
  reservation while the tensor lives, so other threads see it before it is resident.

Outside any reservation the ceiling in force is the one the thread `use`s (the app's Workbench's), else one made from
ATTNVIZ_MEMORY_BUDGET_GB when it is set (the CLI and the notebook API), else none: `spending` then costs a
context-variable read.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from attnviz.memory.budget import BUDGET_VARIABLE, budget_in_force, process_rss, release_memory

T = TypeVar("T")
WAIT_S = 30.0  # the longest a reservation waits for other threads' reservations to end
# What is allocated between two spending sites and seen by none (Python objects, a tokenizer's output, small
# tensors, another thread's step between its checks): the checks keep this much of the budget free. A fuzz of
# every heavy feature under 1.2 GB passed the budget by 27 MB without it (tests/workbench/test_memory_fuzz.py).
SLACK_SHARE, SLACK_MOST = 0.05, 100_000_000
# A batch is sized to this share of what is free: its items' estimates leave out what they hold beside their
# largest tensors (a batch of the Clark card sized to all that was free was refused at its last text's copy).
FIT_SHARE = 0.8
# Making room by trimming the heap counts as progress (look again) only when it gave back this much: each look is a
# full garbage collection, under the ledger's lock.
TRIMMED_ENOUGH = 1_000_000


class OverBudget(Exception):
    """What was asked for does not fit the memory budget, even with every cache emptied and every model no
    visitor is using let go. `others` names the models other visitors are using (name -> bytes), and
    `waiting_helps` says whether the request would fit once they are let go: else only a larger budget (or a
    smaller request) would. `what`: the work that was stopped, in words, when a spending site stopped it."""

    def __init__(self, need: int, budget: int, used: int, others: dict[str, int] | None = None,
                 what: str = "") -> None:
        self.need, self.budget, self.used, self.what = need, budget, used, what
        self.others = dict(others or {})
        self.waiting_helps = bool(self.others) and used - sum(self.others.values()) + need <= budget
        super().__init__(f"{what + ': ' if what else ''}needs {need / 1e9:.2f} GB; budget {budget / 1e9:.1f} GB, "
                         f"{used / 1e9:.2f} GB in use")


@dataclass
class _Tab:
    """One `reserve` block of one thread: the bytes it reserved (its advance, plus what spending sites added) and
    how many of them tensors now being spent hold."""

    ceiling: Ceiling
    keep: Hashable | None
    held: int
    spent: int = 0
    most: int = 0  # the most `spent` was at once (what the block's work held at its peak, by the spending sites)


_TAB: ContextVar[_Tab | None] = ContextVar("attnviz_ceiling_tab", default=None)


class Ceiling:
    """The ledger of one budget. `make_room(deficit, keep)` frees what it can (True when it freed anything; never
    the model `keep`); `others(keep)` names the models other visitors use, for the refusal's message. Both are
    the app's (workbench.shared); the CLI's ceiling has neither."""

    def __init__(self, budget: int, rss: Callable[[], int] = process_rss,
                 make_room: Callable[[int, Hashable | None], bool] | None = None,
                 others: Callable[[], dict[str, int]] | None = None, wait_s: float = WAIT_S,
                 slack: int | None = None) -> None:
        self.budget, self.rss = budget, rss
        # what the checks hold resident memory to: the budget less SLACK_SHARE of it (at most SLACK_MOST), or `slack`
        self.limit = budget - (min(SLACK_MOST, int(SLACK_SHARE * budget)) if slack is None else slack)
        self._make_room = make_room or self._trim
        self._others = others or dict
        self.wait_s = wait_s
        self.reserved = 0
        self._held: dict[int, int] = {}  # thread -> bytes it has reserved (a thread never waits for itself)
        # Reentrant: making room (an eviction, a garbage collection) can free a tensor whose `kept` finalizer gives its
        # bytes back on this very thread while it holds the lock.
        self._released = threading.Condition(threading.RLock())

    def _trim(self, deficit: int, keep: Hashable | None) -> bool:
        """Without an app's caches to let go: hand the heap's freed pages back (glibc keeps freed tensors' memory
        resident otherwise, and the next check would count it); True when resident memory fell by TRIMMED_ENOUGH,
        so that the caller looks again."""
        before = self.rss()
        release_memory()
        return self.rss() < before - TRIMMED_ENOUGH

    def free(self) -> int:
        """What this thread may still spend now: the budget less resident memory and other threads' reservations."""
        with self._released:
            return self.limit - self.rss() - self._reserved_by_others()

    def _reserved_by_others(self) -> int:
        return self.reserved - self._held.get(threading.get_ident(), 0)

    def _take(self, need: int, in_use: Callable[[], int], asked: int, keep: Hashable | None, what: str) -> None:
        """Under the lock: make room, then wait for other threads' reservations, until `in_use()` plus `asked`
        bytes fit the budget; then add `need` to this thread's reservation. OverBudget when neither helps, with
        the bytes asked for and those in use."""
        me, deadline = threading.get_ident(), time.monotonic() + self.wait_s
        while (missing := in_use() + asked - self.limit) > 0:
            # One pass frees what should cover the deficit, then one collection (the Workbench's make_room).
            if self._make_room(missing, keep):
                continue
            left = deadline - time.monotonic()
            if self._reserved_by_others() <= 0 or left <= 0:
                raise OverBudget(asked, self.budget, in_use(), self._others(), what)
            self._released.wait(timeout=left)
        self.reserved += need
        self._held[me] = self._held.get(me, 0) + need

    def _give_back(self, amount: int, thread: int | None = None) -> None:
        """`amount` of `thread`'s reservation (default this thread's) ends: a tensor's finalizer may run on another."""
        me = threading.get_ident() if thread is None else thread
        with self._released:
            self.reserved -= amount
            self._held[me] -= amount
            if not self._held[me]:
                del self._held[me]
            self._released.notify_all()

    @contextlib.contextmanager
    def reserve(self, need: int, keep: Hashable | None = None, what: str = ""):
        """Hold `need` bytes of the budget ahead of the block's work (resident memory plus every reservation plus
        `need` within the budget, room made and others waited for as needed). Inside, spending sites draw on it
        first (`spending`) and add to it what it does not cover; all of it is given back when the block ends.
        `keep`: the model the work runs on, never let go to make room for it."""
        need = max(0, int(need))
        with self._released:
            self._take(need, lambda: self.rss() + self.reserved, need, keep, what)
        tab = _Tab(self, keep, need)
        token = _TAB.set(tab)
        try:
            yield tab
        finally:
            _TAB.reset(token)
            self._give_back(tab.held)

    def spend(self, nbytes: int, what: str = "") -> Callable[[], None]:
        """A spending site is about to allocate `nbytes`: check the backstop (resident memory + nbytes + other
        threads' reservations within the budget, making room and waiting as `reserve` does) and draw the bytes
        from this thread's reservation, adding what it does not cover (it stays in the reservation until the
        block ends: the work's peak). Returns what to call once the tensor is freed."""
        tab = _TAB.get()
        if tab is not None and tab.ceiling is not self:
            tab = None
        covered = 0 if tab is None else max(0, min(nbytes, tab.held - tab.spent))
        extra = nbytes - covered
        with self._released:
            self._take(extra, lambda: self.rss() + self._reserved_by_others(), nbytes,
                       None if tab is None else tab.keep, what)
        if tab is None:  # no block to hold it: only while it lives
            me = threading.get_ident()
            return lambda: self._give_back(extra, me)
        tab.held += extra
        tab.spent += nbytes
        tab.most = max(tab.most, tab.spent)

        def freed() -> None:
            tab.spent -= nbytes
        return freed

    def fit(self, per_item: int, most: int, fixed: int = 0) -> int:
        """How many items of `per_item` bytes (after `fixed` bytes) this thread may spend now: FIT_SHARE of what is
        free, or of what is left of its reservation, at most `most`, at least 1 (the spending site then refuses an
        item that does not fit, with the figures)."""
        tab = _TAB.get()
        unspent = 0 if tab is None or tab.ceiling is not self else max(0, tab.held - tab.spent)
        room = FIT_SHARE * max(self.free(), unspent) - fixed
        return int(max(1, min(most, room // max(1, per_item))))


# The ceiling this thread's work is in (the app sets its Workbench's at the top of every script run and in each
# job's thread, `use`), else None.
_IN_FORCE: ContextVar[Ceiling | None] = ContextVar("attnviz_ceiling", default=None)
_FROM_SETTING: dict[str, Ceiling] = {}  # ATTNVIZ_MEMORY_BUDGET_GB's value -> its ceiling (CLI, notebook API)
_LOCK = threading.Lock()


def use(ceiling: Ceiling | None) -> None:
    """Make `ceiling` the one this thread's work spends against (the app's Workbench's, for every visitor: one
    ledger). Per thread, not per process: a process's tests build many Workbenches."""
    _IN_FORCE.set(ceiling)


def current() -> Ceiling | None:
    """The ceiling in force for this thread: its innermost `reserve` block's, else the one it `use`s, else one for
    ATTNVIZ_MEMORY_BUDGET_GB when the setting is there (one per value, so a changed setting takes effect)."""
    tab = _TAB.get()
    if tab is not None:
        return tab.ceiling
    in_force = _IN_FORCE.get()
    if in_force is not None:
        return in_force
    raw = os.environ.get(BUDGET_VARIABLE, "").strip()
    if not raw:
        return None
    with _LOCK:
        if raw not in _FROM_SETTING:
            _FROM_SETTING[raw] = Ceiling(budget_in_force().bytes)
        return _FROM_SETTING[raw]


@contextlib.contextmanager
def spending(nbytes: int, what: str = ""):
    """Around the allocation and use of a transient of `nbytes` (freed when the block ends): the ceiling's
    backstop and ledger (`Ceiling.spend`), or nothing when no ceiling is in force."""
    ceiling = current()
    if ceiling is None or nbytes <= 0:
        yield
        return
    freed = ceiling.spend(int(nbytes), what)
    try:
        yield
    finally:
        freed()


def kept(nbytes: int, what: str, make: Callable[[], T]) -> T:
    """`make()`'s tensor of `nbytes`, which outlives this step (a recorded map, the logits the caller reads): the
    ceiling's checks before `make` runs, and its bytes drawn from the reservation for as long as it lives."""
    ceiling = current()
    if ceiling is None or nbytes <= 0:
        return make()
    freed = ceiling.spend(int(nbytes), what)
    try:
        tensor = make()
    except BaseException:
        freed()
        raise
    weakref.finalize(tensor, freed)
    return tensor


def fit(per_item: int, most: int, fixed: int = 0) -> int:
    """Items of `per_item` bytes that fit now (`Ceiling.fit`); `most` when no ceiling is in force."""
    ceiling = current()
    return most if ceiling is None else ceiling.fit(per_item, most, fixed)
