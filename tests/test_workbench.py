"""The workbench without Streamlit: the budget's refusal, one result shared by every caller, and the whole
of it importable and usable where Streamlit cannot be imported (a notebook, a script, a test)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
import transformers as tf

from attnviz.workbench import OverBudget, Workbench, shelf, traces
from attnviz.workbench.memory import ByteStore
from tests.conftest import MINILM, ROOT

MB = 1_000_000


def test_reserve_evicts_the_oldest_results_then_refuses():
    """The budget is checked against resident memory: here a fake RSS that follows what the stores hold."""
    bench = Workbench(budget=1_500 * MB)
    bench.rss = lambda: 1_000 * MB + sum(s.total_bytes for s in (bench.models, bench.traces, bench.views))
    bench.traces = ByteStore(1_000 * MB)
    for name in ("a", "b", "c"):
        bench.traces.put(name, object(), 150 * MB)
    bench.models.put("in use", object(), 100 * MB)
    # 1.549 GB (+ the keys' few bytes): the two oldest traces go, the third stays
    with bench.reserve(249 * MB, keep_model="in use"):
        assert bench.traces.keys() == ["c"] and bench.reserved == 249 * MB
    assert bench.reserved == 0
    with pytest.raises(OverBudget) as refused:  # more than the budget can ever give
        with bench.reserve(600 * MB, keep_model="in use"):
            pass
    assert len(bench.traces) == 0 and "in use" in bench.models  # never the model in use
    assert refused.value.budget == 1_500 * MB and refused.value.need == 600 * MB
    assert bench.reserved == 0


def test_too_large_hub_model_is_refused_from_its_config_before_download(monkeypatch):
    from attnviz.loading import hf
    from attnviz.loading.sources import AppSource

    llama_7b = tf.LlamaConfig().to_dict()  # 6.7B parameters
    monkeypatch.setattr(hf, "read_config", lambda source: llama_7b)
    monkeypatch.setattr(hf, "_download", lambda *args: pytest.fail("downloaded a model that cannot fit"))
    shelf.hub_load_bytes.cache_clear()
    bench = Workbench(budget=16_000_000_000)
    with pytest.raises(OverBudget) as refused:
        shelf.load_model(bench, AppSource("someone/llama-7b", "someone/llama-7b", from_hub=True))
    assert refused.value.need > 50e9 and refused.value.budget == 16e9
    assert bench.reserved == 0 and len(bench.models) == 0


def test_random_fallback_is_off_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert not shelf.allow_random_fallback()
    monkeypatch.setenv("CI", "")
    assert shelf.allow_random_fallback()


def test_two_callers_share_one_model_and_one_trace(monkeypatch):
    """Two visitors asking at once for the same text get one load and one forward pass: the same object."""
    import attnviz

    loads, runs = [], []
    real_load = attnviz.load

    def counting_load(*args, **kwargs):
        loads.append(args[0])
        model = real_load(*args, **kwargs)
        real_run = model.run
        model.run = lambda *a, **k: runs.append(a) or real_run(*a, **k)
        return model

    monkeypatch.setattr(attnviz, "load", counting_load)
    bench = Workbench(budget=16_000_000_000)
    results, start = [], threading.Barrier(2)

    def visitor():
        start.wait()
        results.append(traces.trace(bench, MINILM, "The keys to the cabinet are on the table.", None))

    threads = [threading.Thread(target=visitor) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(results) == 2
    # The second caller may have asked before the first had stored the trace; then both ran. Afterwards
    # every caller gets the stored one.
    third = traces.trace(bench, MINILM, "The keys to the cabinet are on the table.", None)
    assert third is results[-1] or third is results[0]
    assert len(runs) <= 2
    assert third.attentions.dtype.name == "float16" and not third.attentions.flags.writeable


def test_the_workbench_runs_where_streamlit_cannot_be_imported():
    script = textwrap.dedent(f"""
        import sys
        sys.modules["streamlit"] = None  # any import of streamlit now raises ImportError
        from attnviz.workbench import Workbench, heads, traces
        bench = Workbench(budget=16_000_000_000)
        view = traces.view(bench, {MINILM!r}, "The cat sat on the mat.", None, "word", True)
        assert view.attentions.shape[:2] == (6, 12), view.attentions.shape
        assert traces.view(bench, {MINILM!r}, "The cat sat on the mat.", None, "word", True) is view
        print("ok", len(bench.traces), len(bench.views))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", "1", "1"]
