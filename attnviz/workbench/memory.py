"""A store of shared read-only results bounded by bytes, whose visitor owns what (`VISITOR`), and handing freed
memory back to the OS. The budget itself is attnviz.memory.budget's (re-exported here for the app's modules)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar

from attnviz.memory.budget import (  # noqa: F401  (the app's modules and tests read them from here)
    BUDGET_VARIABLE,
    Budget,
    budget_in_force,
    container_memory_limit,
    memory_budget,
    process_rss,
    release_memory,
    trim_heap,
)

# The visitor on whose behalf this thread computes (the app sets it at the top of every script run and in
# each job's thread; Streamlit runs every session's script in a thread of its own). Stores note it as the
# owner of what is put, so that making room takes a visitor's own older results before anyone else's.
VISITOR: ContextVar[str | None] = ContextVar("attnviz_visitor", default=None)


def key_bytes(key) -> int:
    """Bytes of the text in a store key (a string, or a tuple holding strings)."""
    if isinstance(key, str):
        return len(key.encode())
    if isinstance(key, tuple):
        return sum(key_bytes(part) for part in key)
    return 0


class ByteStore:
    """Least-recently-used store of shared, read-only values, bounded by their bytes, not their count.

    Values are handed out as they are (no copy per read, unlike st.cache_data), so they must not be
    mutated: callers store numpy arrays with the write flag off. Thread-safe: every visitor's script
    runs in its own thread."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Hashable, tuple[object, int, str | None]] = OrderedDict()  # value, bytes, owner
        self._lock = threading.Lock()
        self._total = 0

    def get(self, key: Hashable):
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def put(self, key: Hashable, value, nbytes: int) -> bool:
        """Keep `value`, evicting the oldest entries to make room; False (nothing kept) when it alone
        exceeds the capacity. The key's text counts too: a visitor's 20,000-character sentence can key
        a value of a few hundred bytes."""
        nbytes += key_bytes(key)
        with self._lock:
            self._pop(key)
            if nbytes > self.capacity:
                return False
            while self._items and self._total + nbytes > self.capacity:
                self._pop(next(iter(self._items)))
            self._items[key] = (value, nbytes, VISITOR.get())
            self._total += nbytes
            return True

    def _pop(self, key: Hashable) -> None:
        entry = self._items.pop(key, None)
        if entry is not None:
            self._total -= entry[1]

    def evict_for(self, visitor: str | None, tier: int, want: int) -> int:
        """Drop entries of one tier, least recently used first, until they held `want` bytes (in one pass
        over the store); return the bytes they held. Tier 0: `visitor`'s own entries; tier 1: other
        visitors' entries except each one's most recent (the one its page shows); tier 2: any entry. A flood
        of one visitor's texts so pushes out its own older results first."""
        with self._lock:
            newest: dict[str | None, Hashable] = {}
            for key, (_, _, owner) in self._items.items():
                newest[owner] = key
            chosen, freed = [], 0
            for key, (_, nbytes, owner) in self._items.items():
                if freed >= want:
                    break
                if tier == 2 or ((owner == visitor) if tier == 0 else (owner != visitor and newest[owner] != key)):
                    chosen.append(key)
                    freed += nbytes
            for key in chosen:
                self._pop(key)
            return freed

    def nbytes(self, key: Hashable) -> int:
        """The bytes counted for `key` (0 when absent), without counting as a use."""
        with self._lock:
            entry = self._items.get(key)
            return 0 if entry is None else entry[1]

    def keys(self) -> list:
        """Keys, least recently used first."""
        with self._lock:
            return list(self._items)

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._pop(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0

    @property
    def total_bytes(self) -> int:
        return self._total  # kept as entries come and go: put() runs under a lock every session shares

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
