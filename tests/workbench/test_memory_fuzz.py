"""Every heavy feature with random sizes in one server process under a low budget (issue 36, item 8): the cards,
the corpus map, sink anatomy, patching and its estimate, routes, the logit lens, long texts, exports and uploads,
through the workbench functions the pages call, on SmolLM2 and MiniLM together, first one job at a time and then four
visitors at once. The process's peak resident memory (VmHWM, measured by the kernel) never passes the budget, and
every job either finishes or is refused with words the page shows (OverBudget's figures, a ValueError's reason,
a job bound); nothing else escapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_offline

ROOT = Path(__file__).resolve().parents[2]
BUDGET_GB = 1.2
WORKER = r"""
import json, random, sys, threading, time, traceback
import attnviz.loading.hf
from attnviz.workbench import OverBudget, Workbench, findings, head_finder, patching, qkmap, readout, shelf, sinks
from attnviz.workbench import traces
from attnviz.analysis.export import trace_npz

attnviz.loading.hf.import_transformers()
seed, jobs_alone, visitors, jobs_each = map(int, sys.argv[1:5])
bench = Workbench()
SMOL, MINI = "HuggingFaceTB/SmolLM2-135M-Instruct", "sentence-transformers/all-MiniLM-L6-v2"
WORDS = "the keys to the old cabinet are on a small table near my door and cats run by the river".split()
CARD = next(c for c in findings.cards() if c.id == "clark2019")

def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))

def conllu(rng, n, length):
    rows = []
    for s in range(n):
        rows.append(f"# text = s{s}")
        for i in range(1, length + 1):
            rel = "root" if i == 1 else rng.choice(["det", "nsubj", "obj", "amod"])
            head = 0 if i == 1 else rng.randint(1, i - 1)
            rows.append(f"{i}\t{rng.choice(WORDS)}\t_\tNOUN\t_\t_\t{head}\t{rel}\t_\t_")
        rows.append("")
    return ("\n".join(rows) + "\n").encode()

def model_of(name):
    return shelf.load_model(bench, shelf.check_source(name))

def job(rng):
    name = rng.choice([SMOL, SMOL, MINI])
    kind = rng.choice(["trace", "long", "sinks", "qkmap", "card", "export", "upload"] +
                      (["patch", "estimate", "routes", "lens"] if name == SMOL else []))
    model = model_of(name)
    if kind == "trace":
        return kind, lambda: traces.trace(bench, name, words(rng, rng.randint(5, 400)), None)
    if kind == "long":
        return kind, lambda: traces.reduced(bench, name, words(rng, rng.randint(300, 2500)), None)
    if kind == "sinks":
        texts = [words(rng, rng.randint(3, 120)) for _ in range(rng.randint(2, 60))]
        return kind, lambda: sinks.anatomy(bench, model, name, texts)
    if kind == "qkmap":
        sentences = [qkmap.qkmap.CorpusSentence(words(rng, rng.randint(3, 40))) for _ in range(200)]
        n = rng.randint(10, 200)
        layer, head = rng.randrange(model.info.n_layers), rng.randrange(model.info.n_heads)
        return kind, lambda: qkmap.qk_map(bench, model, name, layer, head, f"fuzz{rng.random()}", sentences, n)
    if kind == "card":
        data = conllu(rng, rng.randint(2, 40), rng.randint(3, 90))
        def card():
            parsed = head_finder.parsed_file(bench, "conllu", data, "visitor.conllu", card=True)
            return findings.run(bench, CARD, model, name, parsed.items, data)
        return kind, card
    if kind == "export":
        text = words(rng, rng.randint(5, 300))
        return kind, lambda: traces.export(bench, model, text, None, "npz", trace_npz)
    if kind == "upload":
        size = rng.randint(1, 20) * 1_000_000
        line = (words(rng, 12) + "\n").encode()
        data = line * (size // len(line))  # one bytes object, as an uploader holds it
        return kind, lambda: (qkmap.uploaded_corpus("mine.txt", data), sinks.uploaded_texts("mine.txt", data))
    if kind == "patch":
        n = rng.randint(4, 60)
        clean = "The keys " + words(rng, n) + " are"
        return kind, lambda: patching.patch(bench, model, name, clean, clean.replace("keys", "key", 1), " are", " is",
                                             "denoise")
    if kind == "estimate":  # attribution patching: autograd keeps every layer until the backward pass
        n = rng.randint(4, 60)
        clean = "The keys " + words(rng, n) + " are"
        return kind, lambda: patching.estimate(bench, model, name, clean, clean.replace("keys", "key", 1), " are",
                                               " is", "denoise")
    text = words(rng, rng.randint(5, 120))
    if kind == "routes":
        return kind, lambda: readout.routes(bench, name, text, len(model.encode(text).ids) - 1, 0.04)
    return kind, lambda: readout.logit_lens(bench, name, text, len(model.encode(text).ids) - 1, None)

outcomes = []
lock = threading.Lock()

def visitor(index, n):
    bench.serve(f"visitor-{index}")
    rng = random.Random(seed * 100 + index)
    for _ in range(n):
        kind = "load"  # until the job is made: making it loads its model, which the budget may refuse
        try:
            kind, work = job(rng)
            work()
            outcome, words_ = "finished", ""
        except (OverBudget, ValueError) as error:
            outcome, words_ = type(error).__name__, str(error)
        except Exception as error:
            outcome, words_ = "escaped", "".join(traceback.format_exception(error))
        with lock:
            outcomes.append({"visitor": index, "kind": kind, "outcome": outcome, "words": words_[:300]})

def phase(count, n):
    threads = [threading.Thread(target=visitor, args=(i, n)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

started = time.monotonic()
phase(1, jobs_alone)
phase(visitors, jobs_each)
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"peak": peak, "outcomes": outcomes, "seconds": time.monotonic() - started}))
"""


def fuzz(seed: int, jobs_alone: int, visitors: int, jobs_each: int, budget_gb: float = BUDGET_GB) -> dict:
    env = dict(os.environ, ATTNVIZ_MEMORY_BUDGET_GB=str(budget_gb), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", WORKER, str(seed), str(jobs_alone), str(visitors), str(jobs_each)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_heavy_features_with_random_sizes_never_pass_a_low_budget():
    require_offline("HuggingFaceTB/SmolLM2-135M-Instruct")
    require_offline("sentence-transformers/all-MiniLM-L6-v2")
    found = fuzz(seed=int(os.environ.get("ATTNVIZ_FUZZ_SEED", "1")), jobs_alone=6, visitors=3, jobs_each=2)
    outcomes = found["outcomes"]
    escaped = [o for o in outcomes if o["outcome"] == "escaped"]
    assert not escaped, escaped
    assert found["peak"] <= BUDGET_GB * 1e9, (found["peak"], outcomes)
    for refused in (o for o in outcomes if o["outcome"] == "OverBudget"):
        assert "needs" in refused["words"] and "budget 1.2 GB" in refused["words"], refused
    kinds = {o["kind"] for o in outcomes}
    assert len(outcomes) == 6 + 3 * 2 and len(kinds) >= 5, kinds
    assert any(o["outcome"] == "finished" for o in outcomes)
