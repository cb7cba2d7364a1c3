"""Reduced runs' peak memory in a long-lived process, measured for an app tree (benchmarks/bench_reduced_peak.py
prints it side by side for several trees; tests/ui/test_long_explore.py checks traces.reduced_bytes against it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import json, os, random, sys, threading
from attnviz.workbench import Workbench, shelf, traces
import attnviz.loading.hf

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

WORDS = ("minute boy arm doctor plan moment word team night piece experience community step teacher art "
         "control report friend world site door").split()

def text_of(seed, chars):
    rng, out, size = random.Random(seed), [], 0
    while size < chars:
        out.append(rng.choice(WORDS))
        size += len(out[-1]) + 1
    return " ".join(out)[:chars]

def in_thread(work):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", work()))
    thread.start()
    thread.join()
    return box["value"]

attnviz.loading.hf.import_transformers()
bench = Workbench(budget=16_000_000_000)
name = "HuggingFaceTB/SmolLM2-135M-Instruct"
model = shelf.load_model(bench, shelf.check_source(name))
runs, chars = int(sys.argv[1]), int(sys.argv[2])
for i in range(runs):
    in_thread(lambda: traces.trace(bench, name, text_of(1000 + i, 1500), None))
    text = text_of(80 + i, chars)
    before = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # the high-water mark starts again from here
    held = in_thread(lambda: traces.reduced(bench, name, text, None))
    times = os.times()
    print(json.dumps({"tokens": len(held.tokens), "rss_before": before, "peak_over": status("VmHWM") - before,
                      "reserved": traces.reduced_bytes(model, len(held.tokens)), "held": held.nbytes,
                      "cpu_s": times.user + times.system}), flush=True)
"""


def measure(tree: Path, runs: int, chars: int = 20_000) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(tree), ATTNVIZ_MAX_TOKENS=os.environ.get("ATTNVIZ_MAX_TOKENS", "4096"))
    done = subprocess.run([sys.executable, "-c", WORKER, str(runs), str(chars)], cwd=tree, env=env, capture_output=True,
                          text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
