"""The process's memory budget, and a store of shared read-only results bounded by bytes.

A public app has one process for every visitor (Streamlit Community Cloud gives it about 2.7 GB), so
what one visitor asks for must never push the process past one budget: ATTNVIZ_MEMORY_BUDGET_GB, else one
that follows the machine (`budget_in_force`; docs/app.md, "Public host"). The budget is checked
against the process's real resident memory, so it counts everything: models, traces, per-session state,
uploads.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

# The visitor on whose behalf this thread computes (the app sets it at the top of every script run and in
# each job's thread; Streamlit runs every session's script in a thread of its own). Stores note it as the
# owner of what is put, so that making room takes a visitor's own older results before anyone else's.
VISITOR: ContextVar[str | None] = ContextVar("attnviz_visitor", default=None)

BUDGET_VARIABLE = "ATTNVIZ_MEMORY_BUDGET_GB"
# Without the setting, the budget follows where the app runs (docs/app.md, "Public host"):
# - in a container with a memory limit, the limit less CONTAINER_HEADROOM (at least that many bytes, or that
#   share of a larger limit). The budget is checked against this process's resident memory, but the
#   container's limit also counts what that does not: the kernel's memory for the process (page tables,
#   socket buffers), the page cache of the model files it reads, and whatever a load allocates between two
#   checks. Community Cloud's 2.7 GB so gets 2.5 GB, the budget the hostile-memory test has held the
#   ceiling with; a larger limit keeps 5%, as the estimates' errors grow with the models it admits.
# - else MACHINE_SHARE of the machine's memory: on a person's own machine the app shares it with the
#   browser showing it and everything else they run, which a budget checked against this process alone
#   does not see. Half of a 23 GB laptop is 11.5 GB: room for several small models, or one of 1-2B in
#   float32, and the other half stays theirs.
CONTAINER_HEADROOM_BYTES, CONTAINER_HEADROOM_SHARE = 200_000_000, 0.05
MACHINE_SHARE = 0.5  # the sidebar says "half" (ui locales: budget_machine)
CGROUP_ROOT, SELF_CGROUP = Path("/sys/fs/cgroup"), Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Budget:
    """The budget in bytes and why: `basis` is "setting" (the variable), "container" (the container's memory
    limit, `of` bytes) or "machine" (a share of the machine's `of` bytes); "given" for a Workbench built
    with its own (tests, benchmarks)."""

    bytes: int
    basis: str
    of: int = 0


def memory_budget(environ=os.environ) -> int:
    """The budget in bytes (`budget_in_force`)."""
    return budget_in_force(environ).bytes


def budget_in_force(environ=os.environ, cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP,
                    machine_bytes: int | None = None) -> Budget:
    """ATTNVIZ_MEMORY_BUDGET_GB when set (a malformed or non-positive setting is an error, not a silent
    default), else the container's limit less headroom, else a share of the machine's memory."""
    raw = environ.get(BUDGET_VARIABLE, "").strip()
    if raw:
        try:
            gigabytes = float(raw)
        except ValueError:
            raise ValueError(f"{BUDGET_VARIABLE} must be a number of gigabytes, got {raw!r}") from None
        if not gigabytes > 0:
            raise ValueError(f"{BUDGET_VARIABLE} must be positive, got {raw!r}")
        return Budget(int(gigabytes * 1e9), "setting")
    if machine_bytes is None:
        import psutil

        machine_bytes = psutil.virtual_memory().total
    limit = container_memory_limit(cgroup_root, self_cgroup)
    if limit is not None and limit < machine_bytes:  # "no limit" reads as a huge number (v1) or "max" (v2)
        headroom = max(CONTAINER_HEADROOM_BYTES, int(CONTAINER_HEADROOM_SHARE * limit))
        return Budget(max(limit - headroom, limit // 2), "container", limit)
    return Budget(int(MACHINE_SHARE * machine_bytes), "machine", machine_bytes)


def container_memory_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """The tightest memory limit of this process's cgroup and its parents, in bytes, or None: cgroup v2's
    `memory.max`, v1's `memory.limit_in_bytes`. Inside a container the cgroup is usually mounted at its own
    level (`/proc/self/cgroup` then names a path the mount does not have), so the root's files count too."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    places = {root / "memory.max", root / "memory" / "memory.limit_in_bytes"}
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        relative = Path(path.lstrip("/"))
        if controllers == "":  # v2's unified hierarchy
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        for level in (relative, *relative.parents):
            places.add(base / level / name)
    limits = []
    for place in places:
        try:
            text = place.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # v2 writes "max" for no limit
            limits.append(int(text))
    return min(limits, default=None)


def process_rss() -> int:
    """Resident memory of this process, in bytes."""
    import psutil

    return psutil.Process().memory_info().rss


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


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc keeps them otherwise), so that
    resident memory, which the budget is checked against, follows what is really held."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc():
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc_trim  # glibc only  # noqa: B018
        return libc
    return None


_LIBC = _libc()
