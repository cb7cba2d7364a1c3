"""The memory budget bounds the CLI too (issue 36, item 6): with ATTNVIZ_MEMORY_BUDGET_GB set, sink anatomy over
long texts stays under the budget with the same numbers (its batches shrink to what is free), or refuses with the
figures when even one text does not fit; the process's peak is measured by the kernel (ru_maxrss of a process
whose only child is the command)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

from tests.conftest import require_offline

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MEASURED = r"""
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
print("PEAK", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, done.returncode)
"""


def _sinks(texts, budget_gb: float | None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("ATTNVIZ_MEMORY_BUDGET_GB", None)
    if budget_gb is not None:
        env["ATTNVIZ_MEMORY_BUDGET_GB"] = str(budget_gb)
    command = [sys.executable, "-m", "attnviz", "sinks", "--model", MINILM, "--texts", str(texts), "--json"]
    done = subprocess.run([sys.executable, "-c", MEASURED, *command], capture_output=True, text=True, env=env,
                          timeout=600)
    peak, code = done.stdout.rsplit("PEAK", 1)[1].split()
    return done.stdout.rsplit("PEAK", 1)[0], done.stderr, int(peak), int(code)


def test_sink_anatomy_from_the_command_line_stays_under_the_budget_or_refuses_with_figures(tmp_path):
    require_offline(MINILM)
    words = "the cat saw a dog near the old house and a small tree by the river".split()
    rng = random.Random(0)
    texts = tmp_path / "long.txt"
    texts.write_text("\n".join(" ".join(rng.choice(words) for _ in range(400)) for _ in range(12)) + "\n")

    free, _, free_peak, code = _sinks(texts, None)
    assert code == 0
    budget = 0.75  # GB: MiniLM's process is ~0.45 GB before its first batch; the 12 texts at once reach ~1.2
    assert free_peak > budget * 1e9, "the unbounded run should need more than the budget for this test to mean much"

    bounded, _, peak, code = _sinks(texts, budget)
    assert code == 0 and peak <= budget * 1e9, peak
    assert json.loads(bounded) == json.loads(free)  # smaller batches, the same numbers

    _, error, peak, code = _sinks(texts, 0.5)  # not even one text's maps and float64 rows fit beside the model
    assert code == 3 and peak <= 0.5e9, (code, peak, error)
    assert "needs" in error and "budget 0.5 GB" in error and "Traceback" not in error
