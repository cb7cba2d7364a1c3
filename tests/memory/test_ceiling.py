"""The memory ceiling kept where memory is spent (attnviz.memory.ceiling): the ledger's arithmetic with a given
resident size, then a real forward pass of our transformer measured against the process's own peak (VmHWM)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import torch

from attnviz.memory import ceiling
from attnviz.memory.budget import process_rss, release_memory
from attnviz.memory.ceiling import Ceiling, OverBudget
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.model import Transformer
from tests.conftest import ROOT

MB = 1_000_000


def test_a_spending_site_draws_on_the_reservation_and_adds_what_it_does_not_cover():
    resident = [500 * MB]
    ledger = Ceiling(1_000 * MB, rss=lambda: resident[0])
    with ledger.reserve(100 * MB) as tab, ceiling.spending(60 * MB):
        assert ledger.reserved == 100 * MB  # covered by the advance
        with ceiling.spending(70 * MB):  # 40 of it are not: other threads must see them before they are resident
            assert ledger.reserved == 130 * MB and tab.spent == 130 * MB
        assert tab.spent == 60 * MB
    assert ledger.reserved == 0 and tab.most == 130 * MB


def test_the_backstop_stops_work_before_it_allocates_and_names_it():
    resident = [900 * MB]
    ledger = Ceiling(1_000 * MB, rss=lambda: resident[0], wait_s=0.1)
    ran = []
    with ledger.reserve(50 * MB), pytest.raises(OverBudget) as refused:  # the advance fitted; the real use does not
        with ceiling.spending(150 * MB, "the attention maps"):
            ran.append(True)
    assert not ran and ledger.reserved == 0
    assert refused.value.need == 150 * MB and "the attention maps" in str(refused.value)


def test_another_threads_reservation_counts_against_this_threads_spending():
    resident = [350 * MB]
    ledger = Ceiling(1_000 * MB, rss=lambda: resident[0], wait_s=0.2)  # checks hold resident memory to 950 MB
    held, release = threading.Event(), threading.Event()

    def other():
        with ledger.reserve(500 * MB):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    held.wait(5)
    try:
        assert ledger.free() == 100 * MB
        with pytest.raises(OverBudget):  # 350 resident + 500 promised to the other + 200 > 950
            with ledger.reserve(0), ceiling.spending(200 * MB):
                pass
        assert ledger.fit(30 * MB, most=32) == 2  # 80% of the 100 MB free
        assert ledger.fit(150 * MB, most=32) == 1  # never 0: the site itself refuses an item that does not fit
        with ledger.reserve(0):
            assert ceiling.fit(30 * MB, most=2) == 2
    finally:
        release.set()
        thread.join()


@pytest.fixture(autouse=True)
def no_ceiling_in_force():
    """Each test starts with no ceiling in force on this thread: a Workbench served on the test thread by a test
    before it (`Workbench.serve` sets its ceiling for the thread) would otherwise bound these tests' passes."""
    ceiling.use(None)
    yield
    ceiling.use(None)


def _peak() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:  # "5" resets VmHWM to the current resident size
        refs.write("5")


def _model() -> Transformer:
    config = ModelConfig(family="gpt2", vocab_size=50, d_model=64, n_layers=4, n_heads=16, d_ff=128, causal=True,
                         norm_placement="pre", max_positions=2048)
    torch.manual_seed(0)
    return Transformer(config).eval()


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="reads /proc (Linux)")
def test_a_forward_pass_spends_what_it_allocates_and_stops_before_the_budget():
    """16 heads at 1,024 tokens: each layer's maps are 64 MB, the recorded maps of 4 layers 256 MB. The peak the
    kernel measures (VmHWM) stays within what the spending sites counted; a budget 100 MB above what is resident
    stops the pass before its maps are allocated, and the process never passes that budget.

    Measured in a fresh interpreter (`measure_spending`): the peak and the resident memory are the process's, and
    in a CI worker that had run other test files first the same pass's peak read 200 MB above what this one
    process measures, with no other thread alive."""
    done = subprocess.run([sys.executable, "-c", "from tests.memory.test_ceiling import measure_spending; "
                           "measure_spending()"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("measured"), done.stdout


def measure_spending() -> None:
    """The test above, in this process: raises AssertionError (or pytest's failure) where it fails."""
    model, ids = _model(), torch.randint(0, 50, (1, 1024))
    torch.set_num_threads(1)
    with torch.inference_mode():
        model(ids[:, :8])  # torch's own first-call allocations, outside the measurement
        # What earlier tests in this process freed goes back to the OS first: else resident memory counts heap the
        # pass may reuse or the ceiling may trim while making room, and the baseline depends on what ran before.
        release_memory()
        _reset_peak()
        start = process_rss()
        with Ceiling(start + 4_000 * MB).reserve(0) as tab:
            out = model(ids)
        grew = _peak() - start
        del out
        assert tab.most >= 256 * MB
        # nothing large was allocated unseen (the threads alive name what else could have allocated meanwhile)
        assert grew <= 1.1 * tab.most + 30 * MB, (grew, tab.most, [t.name for t in threading.enumerate()])

        release_memory()
        _reset_peak()
        start = process_rss()
        with pytest.raises(OverBudget) as refused, Ceiling(start + 100 * MB).reserve(0):
            model(ids)
        assert _peak() - start < 100 * MB
        assert "attention maps" in str(refused.value)
    print("measured")


def test_the_setting_bounds_work_outside_the_app(monkeypatch):
    """With ATTNVIZ_MEMORY_BUDGET_GB and no app, the CLI's and the notebook API's passes are bounded too."""
    model, ids = _model(), torch.randint(0, 50, (1, 1024))
    release_memory()  # else the ceiling's own trim while making room can free more than the 50 MB margin
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_GB", f"{(process_rss() + 50 * MB) / 1e9:.3f}")
    with torch.inference_mode(), pytest.raises(OverBudget):
        model(ids)
    monkeypatch.delenv("ATTNVIZ_MEMORY_BUDGET_GB")
    assert ceiling.current() is None


def test_a_kept_tensor_freed_on_another_thread_or_while_making_room_gives_its_bytes_back():
    """`kept` tensors give their bytes back when they die: on another thread (a finalizer runs where the collection
    does), or on this thread while it holds the ledger's lock to make room (a reentrant lock, no deadlock)."""
    resident = [100 * MB]
    held = []
    ledger = Ceiling(1_000 * MB, rss=lambda: resident[0], slack=0)
    ceiling.use(ledger)
    try:
        held.append(ceiling.kept(300 * MB, "kept", lambda: torch.zeros(1)))
        assert ledger.reserved == 300 * MB
        thread = threading.Thread(target=held.clear)  # the tensor dies on another thread
        thread.start()
        thread.join()
        assert ledger.reserved == 0 and ledger._held == {}

        held.append(ceiling.kept(300 * MB, "kept", lambda: torch.zeros(1)))

        def make_room(deficit, keep):  # an eviction that drops the kept tensor while the lock is held
            if not held:
                return False
            held.clear()
            resident[0] -= 300 * MB
            return True

        ledger._make_room = make_room
        resident[0] = 800 * MB
        with ceiling.spending(250 * MB):  # 800 resident + 250 > 1,000: room is made by dropping the kept tensor
            assert ledger.reserved == 250 * MB
        assert ledger.reserved == 0
    finally:
        ceiling.use(None)
