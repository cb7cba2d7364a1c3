"""The Workbench: what every visitor's request goes through. It holds the byte-bounded stores of models,
traces and views, the memory budget's reservations and the heavy-work slots, shared by every session of
the process (the app keeps one in `st.cache_resource`). Results are keyed by plain values (model source,
texts, options), so two visitors asking for the same thing share one computed value."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable

from attnviz.loading.hf import import_transformers
from attnviz.memory import ceiling
from attnviz.memory.ceiling import Ceiling, OverBudget
from attnviz.workbench.jobs import Jobs
from attnviz.workbench.memory import VISITOR, Budget, ByteStore, budget_in_force, process_rss, release_memory
from attnviz.workbench.slots import HeavySlots

__all__ = ["OverBudget", "Workbench"]

# Shares of the budget the caches may fill at most; the rest is models, the runtime and per-session state.
TRACE_SHARE, VIEW_SHARE = 0.2, 0.1
# A model is in use while it is the model a visitor's page shows: the last one that visitor asked for
# (`Workbench.model_asked`), asked within this many seconds or with a heavy action of theirs running. A model
# in use is never evicted to make room; any other is, least recently used first. So a visitor switching
# models lets their previous one go at once (one visitor switching MiniLM -> SmolLM2 -> Gemma 3 -> SmolLM2
# was refused under 2.5 GB while the last 300 s counted every model they had looked at), and a tab left
# alone this long gives its model up to the next visitor who needs the room.
IN_USE_S = 300.0
# Work on more than this many bytes goes one at a time (`run_slot`): the forward pass, the view and the mosaic
# of a long text. Five tabs of 512-token texts at once on a shared CPU only slowed each other, left no room in
# the budget for anyone else, and held the interpreter in turn so that a light visitor's short rerun waited
# for all five (p50 0.46 s alone, 2.2 s beside them with the forward passes alone serialised).
LARGE_RUN_BYTES = 100_000_000
RESERVE_WAIT_S = ceiling.WAIT_S


class Workbench:
    def __init__(self, budget: int | None = None, rss: Callable[[], int] = process_rss) -> None:
        self.budget_rule: Budget = budget_in_force() if budget is None else Budget(budget, "given")
        self.budget = self.budget_rule.bytes
        self.rss = rss  # the process's resident bytes; a test passes its own
        self.models = ByteStore(self.budget)
        self.traces = ByteStore(int(TRACE_SHARE * self.budget))
        self.views = ByteStore(int(VIEW_SHARE * self.budget))
        self.slots = HeavySlots()
        # heavy actions in threads of their own, cancellable from the page, time-bounded on a shared host
        self.jobs = Jobs(self.slots, basis=self.budget_rule.basis, serve=self.serve)
        self.large_runs = threading.Lock()
        self._guard = threading.Lock()
        # The one ledger of the budget: reservations made ahead (`reserve`) and the bytes spent where tensors
        # are allocated (attnviz.memory.ceiling); the app's Workbench is the process's, for every visitor.
        # A budget given in bytes (tests, benchmarks) is held exactly; one from the machine keeps its slack.
        self.ceiling = Ceiling(self.budget, lambda: self.rss(), self._make_room,
                               lambda: self._held_by_others(VISITOR.get()), RESERVE_WAIT_S,
                               slack=0 if self.budget_rule.basis == "given" else None)
        self._load_locks: dict[Hashable, threading.Lock] = {}
        self.fixtures: dict[Hashable, object] = {}  # the untrained fallback models, never evicted
        # transformers' names, once, now: the first visitors then never import it from several threads at once
        import_transformers()
        # What a visitor typed -> the model store's key (shelf.load_model); bounded, since names are typed.
        self.model_keys = ByteStore(1_000_000)
        # visitor -> (model store key, its name as typed, when its page last asked for it): IN_USE_S
        self._current: dict[str | None, tuple[Hashable, str, float]] = {}

    def reserve(self, need: int, keep_model: Hashable | None = None):
        """Hold `need` bytes of the budget while the block computes (attnviz.memory.ceiling: the tensors the work
        allocates are spent from it, and what it does not cover is checked where they are allocated). Room is
        made by evicting views and traces (this visitor's own older ones first, other visitors' current ones
        last), then models no visitor is using (`in_use`; never `keep_model`). When that is not enough but other
        threads hold reservations, wait for them to end (at most RESERVE_WAIT_S): a light visitor's 30 MB was
        refused while a 512-token run of another visitor held 0.67 GB for a few seconds. OverBudget when even
        that is not enough."""
        return self.ceiling.reserve(need, self.model_keys.get(keep_model) or keep_model)

    def serve(self, visitor: str | None) -> None:
        """This thread now computes for `visitor` (memory.VISITOR: whose results the stores hold), and every
        tensor it allocates is spent against this Workbench's ceiling (attnviz.memory.ceiling)."""
        VISITOR.set(visitor)
        ceiling.use(self.ceiling)

    @property
    def reserved(self) -> int:
        return self.ceiling.reserved

    def _make_room(self, deficit: int, keep_model: Hashable | None) -> bool:
        """The ceiling's way to make room: one pass evicts what should cover the deficit, then one collection
        (entry by entry, with a full gc.collect() each, 4,000 small entries kept every other reservation waiting
        minutes). True when anything was let go or resident memory fell."""
        before = self.rss()
        evicted = self._evict_results(VISITOR.get(), deficit) or self._evict_model(keep_model)
        release_memory()  # also with nothing evicted: freed tensors stay resident in glibc's heap until trimmed
        return evicted or self.rss() < before - ceiling.TRIMMED_ENOUGH

    @contextlib.contextmanager
    def run_slot(self, need: int):
        """Around work on `need` bytes: large work waits for the other large work; a light visitor's short
        text never waits. Not reentrant: callers hold it around one step at a time."""
        if need <= LARGE_RUN_BYTES:
            yield
            return
        with self.large_runs:
            yield

    def free_bytes(self) -> int:
        """What is left of the budget now, before any eviction."""
        return self.budget - self.rss() - self.ceiling.reserved

    def _evict_results(self, visitor: str | None, want: int) -> int:
        """Evict views and traces, tier by tier (memory.ByteStore.evict_for), until they held `want` bytes."""
        freed = 0
        for tier in (0, 1, 2):
            for store in (self.views, self.traces):
                if freed < want:
                    freed += store.evict_for(visitor, tier, want - freed)
        return freed

    def model_asked(self, key: Hashable, name: str | None = None) -> None:
        """The visitor of this thread (memory.VISITOR) uses the model under `key` now, and no longer the one
        it used before (shelf.load_model, before it loads, and shelf.cached_model)."""
        now = time.monotonic()
        with self._guard:
            self._current[VISITOR.get()] = (key, name if name is not None else str(key), now)
            if len(self._current) > 64:  # visitors gone for good need no entry
                busy = self._busy_visitors()
                self._current = {v: e for v, e in self._current.items() if now - e[2] <= IN_USE_S or v in busy}

    def _busy_visitors(self) -> set[str]:
        return {job.session_id for job in self.jobs.running()}

    def in_use(self) -> dict[Hashable, set]:
        """Models in use (IN_USE_S) -> the visitors using them."""
        now, busy, users = time.monotonic(), self._busy_visitors(), {}
        with self._guard:
            for visitor, (key, _, asked) in self._current.items():
                if now - asked <= IN_USE_S or visitor in busy:
                    users.setdefault(key, set()).add(visitor)
        return users

    def _held_by_others(self, visitor: str | None) -> dict[str, int]:
        """The models other visitors than `visitor` are using, by name, with the bytes the store counts."""
        with self._guard:
            names = {key: name for key, name, _ in self._current.values()}
        return {names[key]: self.models.nbytes(key) for key, users in self.in_use().items()
                if users - {visitor} and key in self.models}

    def _evict_model(self, keep: Hashable | None) -> bool:
        """Drop the least recently used model that is not `keep` and that no visitor is using."""
        in_use = self.in_use()
        held = [key for key in self.models.keys() if key != keep and key not in in_use]
        if not held:
            return False
        self.models.discard(held[0])
        return True

    def drop_load_lock(self, key: Hashable) -> None:
        """After a load (or its failure): the next load of this source makes a new lock, so the locks do not
        grow with every source a visitor types. A thread still waiting holds its own reference."""
        with self._guard:
            self._load_locks.pop(key, None)

    def load_lock(self, key: Hashable) -> threading.Lock:
        """One lock per model source: a second visitor asking for a model being loaded waits for that load,
        while a long download of one model never blocks visitors of another."""
        with self._guard:
            return self._load_locks.setdefault(key, threading.Lock())

    def shared_value(self, key: tuple, compute: Callable[[], object], nbytes: Callable[[object], int]):
        """The value the views store holds under `key`: computed by `compute()` the first time, then shared by
        every caller as it is (arrays read-only), with `nbytes(value)` counted against the store."""
        value = self.views.get(key)
        if value is None:
            value = compute()
            self.views.put(key, value, nbytes(value))
        return value
