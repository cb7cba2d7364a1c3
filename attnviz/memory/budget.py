"""The process's memory budget: how many bytes the process may hold (`budget_in_force`), and what it holds now
(`process_rss`). A public app has one process for every visitor (Streamlit Community Cloud gives it about 2.7 GB),
so what one visitor asks for must never push the process past one budget: ATTNVIZ_MEMORY_BUDGET_GB, else one that
follows the machine (docs/app.md, "Public host"). It is checked against the process's real resident memory, so it
counts everything: models, traces, per-session state, uploads. Where memory is spent against it:
attnviz.memory.ceiling."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
from dataclasses import dataclass
from pathlib import Path

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


_STATM = "/proc/self/statm"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_rss() -> int:
    """Resident memory of this process, in bytes. Read where memory is spent (attnviz.memory.ceiling: every layer
    of a forward pass), so from /proc/self/statm where there is one (~3 us; psutil's reading is ~10x that)."""
    try:
        with open(_STATM, "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:  # no procfs (macOS, Windows)
        import psutil

        return psutil.Process().memory_info().rss


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
