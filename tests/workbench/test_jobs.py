"""Heavy actions in threads of their own (workbench.jobs): Cancel, a page that stops drawing them, the wait
for a heavy-work slot, and on a shared host the bound on a job's time each end the work at its next progress
step. No Streamlit."""

from __future__ import annotations

import threading
import time

import pytest

from attnviz.workbench import Busy, Cancelled
from attnviz.workbench import jobs as jobs_module
from attnviz.workbench.jobs import JOB_LIMIT_S, Jobs, TooLong, job_limit_s
from attnviz.workbench.slots import HeavySlots


def steps(n: int, step_s: float, reached: list):
    def work(job):
        for i in range(n):
            time.sleep(step_s)
            reached.append(i)
            job.progress(i + 1, n)
        return "done"

    return work


def wait(job, timeout: float = 10.0) -> None:
    assert job.finished.wait(timeout), "the job did not end"


def test_a_job_runs_to_its_result():
    jobs = Jobs(HeavySlots())
    reached = []
    job = jobs.start(("s1", "scan"), "s1", steps(3, 0.01, reached))
    wait(job)
    assert job.result == "done" and job.error is None and (job.done, job.total) == (3, 3)
    assert jobs.start(("s1", "scan"), "s1", steps(3, 0.01, [])) is not job  # finished: a new run


def test_cancel_stops_at_the_next_step():
    jobs = Jobs(HeavySlots())
    reached = []
    job = jobs.start(("s1", "scan"), "s1", steps(270, 0.02, reached))
    while len(reached) < 14:
        time.sleep(0.005)
        job.seen()
    job.cancel()
    at_cancel = len(reached)
    wait(job)
    assert isinstance(job.error, Cancelled) and job.result is None
    assert len(reached) <= at_cancel + 1  # within one progress step, not 270


def test_a_job_no_page_draws_is_cancelled(monkeypatch):
    """The tab closed, or the page moved on: no `seen()` for HEARTBEAT_S."""
    monkeypatch.setattr(jobs_module, "HEARTBEAT_S", 0.2)
    jobs = Jobs(HeavySlots())
    reached = []
    job = jobs.start(("s1", "scan"), "s1", steps(1000, 0.01, reached))
    wait(job)
    assert isinstance(job.error, Cancelled) and len(reached) < 100


def test_waiting_for_the_slot_can_be_cancelled(monkeypatch):
    monkeypatch.setattr("attnviz.workbench.slots.WAIT_STEP_S", 0.05)
    slots = HeavySlots(1)
    jobs = Jobs(slots)
    release, held = threading.Event(), threading.Event()

    def other_visitor():
        with slots.hold("other"):
            held.set()
            release.wait(10)

    threading.Thread(target=other_visitor).start()
    held.wait(5)
    ran = []
    job = jobs.start(("s1", "scan"), "s1", lambda job: ran.append(1))
    time.sleep(0.2)
    assert job.waiting and not job.finished.is_set()
    job.cancel()
    wait(job, 2.0)
    release.set()
    assert isinstance(job.error, Cancelled) and not ran


def test_one_heavy_action_per_visitor():
    jobs = Jobs(HeavySlots(2))
    first = jobs.start(("s1", "scan"), "s1", steps(50, 0.02, []))
    second = jobs.start(("s1", "detectors"), "s1", steps(1, 0.0, []))
    wait(second)
    assert isinstance(second.error, Busy)
    first.cancel()
    wait(first)


def test_the_same_action_asked_twice_is_one_job():
    jobs = Jobs(HeavySlots())
    job = jobs.start(("s1", "scan"), "s1", steps(20, 0.01, []))
    assert jobs.start(("s1", "scan"), "s1", steps(20, 0.01, [])) is job
    assert jobs.running() == [job]
    job.cancel()
    wait(job)
    assert jobs.running() == []


@pytest.mark.parametrize("error", [ValueError("too long"), MemoryError()])
def test_errors_reach_the_page(error):
    jobs = Jobs(HeavySlots())

    def work(job):
        raise error

    job = jobs.start(("s1", "x"), "s1", work)
    wait(job)
    assert job.error is error


class Clock:
    """A clock the test moves; the work's steps move it too."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def minutes_of_work(clock: Clock, n: int):
    """n steps of a minute each, each drawn by the page (seen) as the poll would."""
    def work(job):
        for i in range(n):
            clock.now += 60.0
            job.seen()
            job.progress(i + 1, n)
        return "done"

    return work


def test_a_job_on_a_shared_host_stops_at_its_bound():
    clock = Clock()
    jobs = Jobs(HeavySlots(), clock=clock, basis="container", environ={})
    job = jobs.start(("s1", "scan"), "s1", minutes_of_work(clock, 10))
    wait(job)
    assert isinstance(job.error, TooLong) and isinstance(job.error, Cancelled)  # pages that handle Cancelled
    assert job.error.limit_s == JOB_LIMIT_S == 180.0 and job.done == 4  # stopped at the first step past 3 min


def test_the_bound_counts_from_the_slot_not_the_wait(monkeypatch):
    monkeypatch.setattr("attnviz.workbench.slots.WAIT_STEP_S", 0.02)
    monkeypatch.setattr(jobs_module, "HEARTBEAT_S", 1e9)  # the page keeps drawing it while it waits
    clock, slots = Clock(), HeavySlots(1)
    jobs = Jobs(slots, clock=clock, basis="setting", environ={})
    release, held = threading.Event(), threading.Event()

    def other_visitor():
        with slots.hold("other"):
            held.set()
            release.wait(10)

    threading.Thread(target=other_visitor).start()
    held.wait(5)
    job = jobs.start(("s1", "scan"), "s1", minutes_of_work(clock, 2))
    deadline = time.monotonic() + 5
    while job.ahead != 1:  # the page can say: one task ahead of yours
        assert time.monotonic() < deadline
        time.sleep(0.01)
    clock.now += 20 * 60.0  # twenty minutes in the queue...
    release.set()
    wait(job)
    assert job.result == "done" and job.error is None  # ... and two of work: within the bound


def test_a_persons_own_machine_has_no_bound():
    clock = Clock()
    jobs = Jobs(HeavySlots(), clock=clock, basis="machine", environ={})
    job = jobs.start(("s1", "scan"), "s1", minutes_of_work(clock, 30))
    wait(job)
    assert jobs.limit_s is None and job.result == "done"


@pytest.mark.parametrize(("basis", "setting", "limit"), [
    ("container", "", JOB_LIMIT_S), ("setting", "", JOB_LIMIT_S), ("machine", "", None), ("given", "", None),
    ("machine", "600", 600.0), ("container", "45.5", 45.5), ("container", "0", None), ("machine", " 0 ", None),
])
def test_the_bound_by_host_and_setting(basis, setting, limit):
    assert job_limit_s(basis, {"ATTNVIZ_JOB_LIMIT_S": setting}) == limit


@pytest.mark.parametrize("setting", ["three minutes", "-1", "nan"])
def test_a_malformed_bound_is_an_error(setting):
    with pytest.raises(ValueError, match="ATTNVIZ_JOB_LIMIT_S"):
        job_limit_s("container", {"ATTNVIZ_JOB_LIMIT_S": setting})
