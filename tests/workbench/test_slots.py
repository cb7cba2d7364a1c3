"""The heavy-work slots (workbench.slots) queue their visitors first come first served and tell each how many
tasks start before theirs; leaving the queue moves the ones behind up. Threads, no Streamlit."""

from __future__ import annotations

import threading
import time

import pytest

from attnviz.workbench.slots import Busy, HeavySlots


@pytest.fixture(autouse=True)
def quick_steps(monkeypatch):
    monkeypatch.setattr("attnviz.workbench.slots.WAIT_STEP_S", 0.02)


def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Visitor:
    """A thread that asks for a slot, notes each place it is told, and holds the slot until released."""

    def __init__(self, slots: HeavySlots, name: str, entered: list, leave: threading.Event | None = None):
        self.name, self.places, self.release, self.holding = name, [], threading.Event(), threading.Event()
        self.busy = False
        self._leave = leave or threading.Event()

        def waiting(ahead: int) -> None:
            self.places.append(ahead)
            if self._leave.is_set():
                raise TimeoutError("left")  # as a page's cancellation does

        def run():
            try:
                with slots.hold(name, waiting=waiting):
                    entered.append(name)
                    self.holding.set()
                    self.release.wait(10)
            except TimeoutError:
                pass
            except Busy:
                self.busy = True

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


def test_first_come_first_served_with_places():
    slots, entered = HeavySlots(1), []
    first = Visitor(slots, "a", entered)
    first.holding.wait(5)
    queued = []
    for name in "bcd":  # each one queued before the next asks
        queued.append(Visitor(slots, name, entered))
        until(lambda: queued[-1].places)
    assert [v.places[-1] for v in queued] == [1, 2, 3]  # "a" runs; then those queued earlier
    for holder, behind in [(first, queued), (queued[0], queued[1:]), (queued[1], queued[2:])]:
        holder.release.set()
        until(behind[0].holding.is_set)
        for place, visitor in enumerate(behind[1:], start=1):
            until(lambda visitor=visitor, place=place: visitor.places[-1] == place)  # told it moved up
    queued[2].release.set()
    for visitor in [first, *queued]:
        visitor.thread.join(5)
    assert entered == ["a", "b", "c", "d"]


def test_leaving_the_queue_moves_the_ones_behind_up():
    slots, entered = HeavySlots(1), []
    holder = Visitor(slots, "a", entered)
    holder.holding.wait(5)
    leave = threading.Event()
    leaving = Visitor(slots, "b", entered, leave)
    until(lambda: leaving.places)
    staying = Visitor(slots, "c", entered)
    until(lambda: staying.places and staying.places[-1] == 2)
    leave.set()
    leaving.thread.join(5)
    until(lambda: staying.places[-1] == 1)
    holder.release.set()
    staying.holding.wait(5)
    assert entered == ["a", "c"]
    again = Visitor(slots, "b", entered)  # who left may queue again: no longer Busy
    until(lambda: again.places)
    staying.release.set()
    again.holding.wait(5)
    again.release.set()
    assert not again.busy and entered == ["a", "c", "b"]


def test_a_visitor_waiting_or_holding_is_busy():
    slots, entered = HeavySlots(1), []
    holder = Visitor(slots, "a", entered)
    holder.holding.wait(5)
    waiter = Visitor(slots, "b", entered)
    until(lambda: waiter.places)
    for name in "ab":
        with pytest.raises(Busy), slots.hold(name):
            pass
    holder.release.set()
    waiter.holding.wait(5)
    waiter.release.set()
    waiter.thread.join(5)
    assert entered == ["a", "b"]


def test_a_free_slot_is_taken_at_once_and_counts_the_holders():
    slots, entered = HeavySlots(2), []
    first, second = Visitor(slots, "a", entered), Visitor(slots, "b", entered)
    first.holding.wait(5)
    second.holding.wait(5)
    assert first.places == second.places == []  # never waited
    third = Visitor(slots, "c", entered)
    until(lambda: third.places)
    assert third.places[-1] == 2
    first.release.set()
    third.holding.wait(5)
    second.release.set()
    third.release.set()
    assert sorted(entered[:2]) == ["a", "b"] and entered[2] == "c"
