"""The workbench without Streamlit: the budget's refusal, one result shared by every caller, and the whole
of it importable and usable where Streamlit cannot be imported (a notebook, a script, a test)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

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
    # float32 (27 GB of weights) does not fit, so bfloat16 is tried (13.5 GB) and does not either
    assert refused.value.need > 30e9 and refused.value.budget == 16e9
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
        from attnviz.workbench import Workbench, heads, views
        bench = Workbench(budget=16_000_000_000)
        view = views.view(bench, {MINILM!r}, "The cat sat on the mat.", None, "word", True)
        assert view.attentions.shape[:2] == (6, 12), view.attentions.shape
        assert views.view(bench, {MINILM!r}, "The cat sat on the mat.", None, "word", True) is view
        print("ok", len(bench.traces), len(bench.views))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", "1", "1"]


EXPORT_PEAK = """
import sys
import numpy as np
from attnviz.analysis.export import trace_json, trace_npz
from attnviz.trace import AttentionTrace

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

kind, n_layers, n_heads, n = sys.argv[1], 4, 8, 384
a = np.random.default_rng(0).random((n_layers, n_heads, n, n), dtype=np.float32)
a /= a.sum(-1, keepdims=True)
labels = [f"t{i}" for i in range(n)]
trace = AttentionTrace(tokens=labels, offsets=[(i, i + 1) for i in range(n)], sequence_ids=[0] * n,
                       input_ids=list(range(n)), attentions=a, kv_group=list(range(n_heads)), words=labels,
                       word_of_token=list(range(n)), truncated=False, texts=("x",))
before = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # the high-water mark starts again from here
out = (trace_json if kind == "json" else trace_npz)(trace)
kept = out.encode() if isinstance(out, str) else out  # the bytes Streamlit keeps for the download
print((status("VmHWM") - before) / a.size)
"""


@pytest.mark.parametrize("kind", ["npz", "json"])
def test_export_estimate_covers_the_measured_peak(kind):
    """The export's reservation (workbench.traces.EXPORT_BYTES_PER_CELL, beside the trace itself) against the
    peak resident memory of building it (VmHWM), in a fresh process."""
    from attnviz.workbench.traces import EXPORT_BYTES_PER_CELL

    done = subprocess.run([sys.executable, "-c", EXPORT_PEAK, kind], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = float(done.stdout.strip())
    assert measured <= EXPORT_BYTES_PER_CELL[kind], measured
    assert EXPORT_BYTES_PER_CELL[kind] <= 4 * max(measured, 4.0), measured  # not a guess far above it


def test_spellings_of_one_checkpoint_share_one_model(monkeypatch):
    """`//`, `/./` and `dir/../dir` name one folder: one load, one entry, and each spelling finds it."""
    import attnviz
    from attnviz.loading.offline import offline_path

    folder = offline_path(MINILM)
    spellings = [str(folder), f"{folder.parent}//{folder.name}", f"{folder.parent}/./{folder.name}",
                 f"{folder}/../{folder.name}"]
    loads = []
    real_load = attnviz.load
    monkeypatch.setattr(attnviz, "load", lambda *a, **k: loads.append(a[0]) or real_load(*a, **k))
    bench = Workbench(budget=16_000_000_000)
    models = {id(shelf.load_model(bench, shelf.check_source(text))) for text in spellings}
    assert len(loads) == 1 and len(models) == 1 and len(bench.models) == 1
    assert all(shelf.cached_model(bench, text) is not None for text in spellings)


def test_first_loads_from_many_threads_on_a_cold_process():
    """Four visitors opening a model together on a cold server: every thread gets its config (three of four
    once failed with "cannot import name 'AutoConfig' from 'transformers'")."""
    script = textwrap.dedent(f"""
        import threading
        from attnviz.loading import hf
        from attnviz.loading.offline import offline_path
        folder, results, start = offline_path({MINILM!r}), [], threading.Barrier(4)
        def visitor():
            start.wait()
            try:
                results.append(hf.read_config(folder)["model_type"])
            except Exception as error:
                results.append(repr(error))
        threads = [threading.Thread(target=visitor) for _ in range(4)]
        [thread.start() for thread in threads]
        [thread.join() for thread in threads]
        print(results)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(["bert"] * 4)


def test_a_flood_of_one_visitors_texts_takes_its_own_results_first():
    """Making room for visitor A evicts A's older results, then other visitors' older ones; B's current
    trace (the one B's page shows) goes last."""
    from attnviz.workbench.memory import VISITOR

    bench = Workbench(budget=1_000 * MB)
    bench.traces = ByteStore(1_000 * MB)
    bench.rss = lambda: 300 * MB + bench.traces.total_bytes
    for visitor, keys in (("B", ["b-old", "b-current"]), ("A", ["a1", "a2", "a3"])):
        token = VISITOR.set(visitor)
        for key in keys:
            bench.traces.put(key, object(), 100 * MB)
        VISITOR.reset(token)
    token = VISITOR.set("A")
    try:
        evicted = []
        for _ in range(5):
            before = set(bench.traces.keys())
            with bench.reserve(210 * MB + 100 * MB * len(evicted)):
                pass
            evicted += sorted(before - set(bench.traces.keys()))
    finally:
        VISITOR.reset(token)
    assert evicted == ["a1", "a2", "a3", "b-old", "b-current"]


def test_a_model_in_use_is_never_evicted():
    bench = Workbench(budget=1_000 * MB)
    bench.rss = lambda: 200 * MB + bench.models.total_bytes
    bench.models.put("in use", object(), 500 * MB)
    bench.model_asked("in use")
    bench.models.put("idle", object(), 200 * MB)
    with bench.reserve(299 * MB, keep_model="mine"):  # room only if "idle" goes
        pass
    assert bench.models.keys() == ["in use"]
    with pytest.raises(OverBudget):
        with bench.reserve(500 * MB, keep_model="mine"):
            pass
    assert bench.models.keys() == ["in use"]


PEAK = """
import sys
from attnviz.workbench import Workbench, shelf, traces

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

def measured(step):
    before = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # the high-water mark starts again from here
    result = step()
    return status("VmHWM") - before, result

import attnviz.loading.hf  # the libraries themselves are not what a load reserves
attnviz.loading.hf.import_transformers()
name = sys.argv[1]
bench = Workbench(budget=16_000_000_000)
source = shelf.check_source(name)
load_peak, model = measured(lambda: shelf.load_model(bench, source))
text = " ".join(["The keys to the cabinet are on the table."] * 30)
trace_peak, _ = measured(lambda: traces.trace(bench, name, text, None))
print(load_peak, shelf.source_load_bytes(source), trace_peak, traces.trace_bytes(model, len(model.encode(text).ids)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", [MINILM, "HuggingFaceTB/SmolLM2-135M-Instruct"])
def test_reservations_cover_the_measured_peak(name):
    """What a load reserves (source_load_bytes: a GGUF checkpoint dequantised and converted, or safetensors)
    and what a trace reserves (trace_bytes), against the peak resident memory each reaches (VmHWM) in a fresh
    process."""
    done = subprocess.run([sys.executable, "-c", PEAK, name], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    load_peak, load_estimate, trace_peak, trace_estimate = map(int, done.stdout.split()[-4:])
    assert load_peak <= load_estimate <= 4 * load_peak, (load_peak, load_estimate)
    assert trace_peak <= trace_estimate <= 4 * trace_peak, (trace_peak, trace_estimate)


def test_a_reservation_waits_for_another_visitors_to_end_but_never_for_its_own():
    bench = Workbench(budget=1_000 * MB)
    bench.rss = lambda: 500 * MB
    inside, leave = threading.Event(), threading.Event()

    def long_run():
        with bench.reserve(400 * MB):
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=long_run)
    other.start()
    inside.wait(5)
    threading.Timer(0.3, leave.set).start()
    started = time.monotonic()
    with bench.reserve(200 * MB):  # 500 + 400 + 200 > 1000 until the other run ends
        waited = time.monotonic() - started
    other.join()
    assert 0.2 < waited < 5
    with bench.reserve(300 * MB):  # nested: the thread's own reservation never frees while it waits
        started = time.monotonic()
        with pytest.raises(OverBudget):
            with bench.reserve(300 * MB):
                pass
        # refused without waiting for its own reservation (the wait would be 30 s); making room first (caches
        # evicted, the heap trimmed) took 1.4 s in a CI worker that had loaded many models
        assert time.monotonic() - started < 5
    assert bench.reserved == 0


PARSE_PEAK = """
import sys
from attnviz.workbench import Workbench
from attnviz.workbench import head_finder

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

sentences = []
for s in range(4_000):
    rows = [f"{i}\\tword{i}\\t_\\tX\\t_\\t_\\t{0 if i == 1 else 1}\\t{'root' if i == 1 else 'dep'}\\t_\\t_"
            for i in range(1, 41)]
    sentences.append(f"# sent_id = s{s}\\n" + "\\n".join(rows) + "\\n")
data = "\\n".join(sentences).encode()
bench = Workbench(budget=16_000_000_000)
before = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
items = head_finder.parsed_file(bench, "conllu", data, "x.conllu").items
print((status("VmHWM") - before) / len(data), len(items))
"""


@pytest.mark.slow
def test_an_uploads_reservation_covers_its_parse():
    done = subprocess.run([sys.executable, "-c", PARSE_PEAK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    per_byte, n_items = done.stdout.split()
    from attnviz.workbench.head_finder import PARSE_BYTES_PER_BYTE

    assert int(n_items) == 4_000 * 39
    assert float(per_byte) <= PARSE_BYTES_PER_BYTE <= 4 * float(per_byte), per_byte


def test_making_room_among_thousands_of_small_results_is_quick():
    """Entry by entry, with a full collection each, 4,000 small views kept every reservation waiting for
    minutes (the review measured 276 s): one pass evicts what covers the deficit."""
    from attnviz.workbench.memory import VISITOR

    bench = Workbench(budget=2_500 * MB)
    bench.rss = lambda: 2_400 * MB + bench.views.total_bytes
    for i in range(4_000):
        token = VISITOR.set(f"v{i % 2}")
        bench.views.put(("view", i), object(), 1_000)
        VISITOR.reset(token)
    started = time.monotonic()
    token = VISITOR.set("v3")
    try:
        with pytest.raises(OverBudget):
            with bench.reserve(200 * MB):
                pass
    finally:
        VISITOR.reset(token)
    assert time.monotonic() - started < 5 and len(bench.views) == 0


def test_an_uploads_format_is_told_from_its_first_lines():
    import tracemalloc

    from attnviz.workbench.head_finder import detected_format

    comments = b"#ab\n" * 5_000_000  # 20 MB of comment lines
    tracemalloc.start()
    with pytest.raises(ValueError, match="no content"):
        detected_format("comments.txt", comments)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 * MB, peak
    assert detected_format("x.txt", b"#c\n" * 10 + b'{"relation": "r"}\n') == "probes"
