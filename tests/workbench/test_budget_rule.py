"""The memory budget that follows the machine, models let go before a visitor is refused, and the hub route
(docs/app.md, "Public host"). The cgroup files are fakes in a temporary folder, never the real ones."""

from __future__ import annotations

import time

import pytest

from attnviz.loading import sources
from attnviz.workbench import OverBudget, Workbench
from attnviz.workbench.memory import VISITOR, budget_in_force, container_memory_limit

GB = 1_000_000_000
MB = 1_000_000
NO_SETTING: dict[str, str] = {}


def cgroup(tmp_path, files: dict[str, str], self_line: str = "0::/"):
    root = tmp_path / "cgroup"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text + "\n")
    (tmp_path / "self").write_text(self_line + "\n")
    return dict(cgroup_root=root, self_cgroup=tmp_path / "self")


def test_a_container_limit_less_headroom(tmp_path):
    """Community Cloud's 2.7 GB container gets 2.5 GB; a larger limit keeps 5% aside."""
    rule = budget_in_force(NO_SETTING, **cgroup(tmp_path, {"memory.max": "2700000000"}), machine_bytes=64 * GB)
    assert (rule.basis, rule.bytes, rule.of) == ("container", int(2.5 * GB), int(2.7 * GB))
    rule = budget_in_force(NO_SETTING, **cgroup(tmp_path, {"memory.max": "16000000000"}), machine_bytes=64 * GB)
    assert (rule.basis, rule.bytes) == ("container", int(15.2 * GB))


def test_the_tightest_limit_of_the_cgroup_and_its_parents(tmp_path):
    files = {"app/worker/memory.max": "max", "app/memory.max": "4000000000", "memory.max": "max"}
    places = cgroup(tmp_path, files, "0::/app/worker")
    assert container_memory_limit(places["cgroup_root"], places["self_cgroup"]) == 4 * GB


def test_cgroup_v1_limit_and_its_no_limit(tmp_path):
    limited = cgroup(tmp_path, {"memory/memory.limit_in_bytes": "2700000000"}, "4:memory:/docker/abc")
    assert budget_in_force(NO_SETTING, **limited, machine_bytes=23 * GB).basis == "container"
    # v1 writes a huge number for "no limit" (this machine's own reads 9223372036854771712): the machine's share
    unlimited = cgroup(tmp_path, {"memory/memory.limit_in_bytes": "9223372036854771712"}, "4:memory:/docker/abc")
    rule = budget_in_force(NO_SETTING, **unlimited, machine_bytes=23 * GB)
    assert (rule.basis, rule.bytes, rule.of) == ("machine", int(11.5 * GB), 23 * GB)


def test_no_cgroup_files_is_the_machine_and_the_setting_overrides_both(tmp_path):
    none = cgroup(tmp_path, {})
    assert budget_in_force(NO_SETTING, **none, machine_bytes=8 * GB).bytes == 4 * GB
    limited = cgroup(tmp_path, {"memory.max": "2700000000"})
    rule = budget_in_force({"ATTNVIZ_MEMORY_BUDGET_GB": "6"}, **limited, machine_bytes=8 * GB)
    assert (rule.basis, rule.bytes) == ("setting", 6 * GB)
    with pytest.raises(ValueError, match="ATTNVIZ_MEMORY_BUDGET_GB"):
        budget_in_force({"ATTNVIZ_MEMORY_BUDGET_GB": "0"}, **limited)


def as_visitor(visitor: str, step):
    token = VISITOR.set(visitor)
    try:
        return step()
    finally:
        VISITOR.reset(token)


def bench_with_models(budget: int) -> Workbench:
    bench = Workbench(budget=budget)
    bench.rss = lambda: 300 * MB + bench.models.total_bytes
    return bench


def test_a_visitor_switching_models_lets_the_previous_ones_go():
    """One visitor, three models in turn under a budget that holds two at most: each switch evicts the model
    that visitor left, even within IN_USE_S of its last use."""
    bench = bench_with_models(1_500 * MB)
    for name in ("minilm", "smollm", "gemma"):
        def switch(name=name):
            bench.model_asked(name, name)  # shelf.load_model marks the model before it loads
            with bench.reserve(800 * MB):
                bench.models.put(name, object(), 800 * MB)
        as_visitor("A", switch)
        assert bench.models.keys() == [name]


def test_a_refusal_names_the_models_other_visitors_use_and_never_a_smaller_model_in_vain():
    bench = bench_with_models(1_500 * MB)
    as_visitor("B", lambda: bench.model_asked("gemma", "google/gemma-3-270m"))
    bench.models.put("gemma", object(), 1_000 * MB)
    bench.models.put("idle", object(), 100 * MB)  # nobody's: let go first
    with pytest.raises(OverBudget) as refused:
        as_visitor("A", lambda: bench.reserve(500 * MB).__enter__())
    assert bench.models.keys() == ["gemma"]
    assert refused.value.others == {"google/gemma-3-270m": 1_000 * MB + len("gemma")}  # the key counts too
    assert refused.value.waiting_helps  # it fits once B's Gemma is idle: wait, not "a smaller model"
    with pytest.raises(OverBudget) as refused:  # too large even alone: only a larger budget would do
        as_visitor("A", lambda: bench.reserve(1_300 * MB).__enter__())
    assert not refused.value.waiting_helps


def test_a_visitor_with_a_heavy_action_running_keeps_its_model():
    from attnviz.workbench.shared import IN_USE_S

    bench = bench_with_models(1_000 * MB)
    as_visitor("B", lambda: bench.model_asked("smollm", "smollm"))
    bench.models.put("smollm", object(), 600 * MB)
    bench._current["B"] = ("smollm", "smollm", time.monotonic() - 2 * IN_USE_S)  # B's page went quiet
    bench._busy_visitors = lambda: {"B"}  # but a scan of B's runs
    assert "smollm" in bench.in_use()
    bench._busy_visitors = set
    assert "smollm" not in bench.in_use()  # quiet and idle: the next visitor may have its room


def test_the_hub_route_is_decided_quickly_and_kept():
    calls = []

    def slow_probe(timeout):
        calls.append(timeout)
        time.sleep(3)
        return True

    sources.forget_hub_route()
    started = time.monotonic()
    assert not sources.hub_reachable({}, probe=slow_probe, timeout=0.3)  # no answer in time: no route
    assert time.monotonic() - started < 1.0
    assert not sources.hub_reachable({}, probe=slow_probe, timeout=0.3) and len(calls) == 1  # kept
    sources.forget_hub_route()
    assert sources.hub_reachable({}, probe=lambda timeout: True)
    assert not sources.hub_reachable({"HF_HUB_OFFLINE": "1"}, probe=lambda timeout: True)  # told: never asked
    sources.forget_hub_route()
