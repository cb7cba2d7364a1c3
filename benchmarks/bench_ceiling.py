"""The red team's memory reproductions (issue 36: F1, F4) before and after, side by side in one run: F1 a Clark
card over a visitor's CoNLL-U of 32 sentences of 200 words (and 48 of 150); F4 sink anatomy, a 56-token patch, and
sink anatomy with Gemma 3 270M idle beside SmolLM2.

Each scenario runs in a fresh process under ATTNVIZ_MEMORY_BUDGET_GB (2.5 GB, the public host's), through the
workbench functions the pages call, for each app tree given; it prints the process's peak resident memory
(VmHWM, model load included), whether the work finished or was refused (and the refusal's words), wall time and
CPU seconds of the process.

    .venv/bin/python benchmarks/bench_ceiling.py --before 79a9dbd            # that commit, then this tree
    .venv/bin/python benchmarks/bench_ceiling.py --scenarios f1_clark --budget 1.2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, os, random, sys, threading, time
import attnviz.loading.hf
from attnviz.workbench import OverBudget, Workbench, shelf

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

def treebank(n_sentences, n_words, seed=0):
    # Sentences of `n_words` words, each word's head the word before it (the root the first), relations cycling:
    # what a visitor's CoNLL-U may hold, parsed by the card's own reader.
    rng, words = random.Random(seed), "the cat saw a dog near old house and small tree by river".split()
    relations, out = ["det", "nsubj", "obj", "amod", "obl", "conj"], []
    for s in range(n_sentences):
        out.append(f"# text = s{s}")
        for i in range(1, n_words + 1):
            rel = "root" if i == 1 else relations[i % len(relations)]
            out.append(f"{i}\t{rng.choice(words)}\t_\tNOUN\t_\t_\t{0 if i == 1 else i - 1}\t{rel}\t_\t_")
        out.append("")
    return ("\n".join(out) + "\n").encode()

def run(scenario):
    attnviz.loading.hf.import_transformers()
    bench = Workbench()
    name = "HuggingFaceTB/SmolLM2-135M-Instruct"
    if scenario == "f4_three":  # Gemma 3 loaded and left (this visitor moved on to SmolLM2): idle, evictable
        shelf.load_model(bench, shelf.check_source("google/gemma-3-270m"))
    model = shelf.load_model(bench, shelf.check_source(name))
    loaded = status("VmHWM")
    if scenario.startswith("f1_clark"):
        from attnviz.workbench import findings, head_finder
        n, words = {"f1_clark": (32, 200), "f1_clark_long": (48, 150)}[scenario]
        data = treebank(n, words)
        try:
            parsed = head_finder.parsed_file(bench, "conllu", data, "visitor.conllu", card=True)
        except TypeError:  # the tree before: no card bounds
            parsed = head_finder.parsed_file(bench, "conllu", data, "visitor.conllu")
        card = next(c for c in findings.cards() if c.id == "clark2019")
        return loaded, lambda: findings.run(bench, card, model, name, parsed.items, data)
    if scenario == "overhead":  # what the spending sites cost: 40 plain forward passes of 64 tokens
        text = " ".join(["the keys to the cabinet are on the table"] * 8)
        def passes():
            if hasattr(bench, "serve"):
                bench.serve(None)  # this thread spends against the Workbench's ceiling, as a visitor's does
            for _ in range(40):
                model.run(text)
        return loaded, passes
    if scenario in ("f4_sinks", "f4_three"):
        from attnviz.workbench import sinks
        return loaded, lambda: sinks.anatomy(bench, model, name, None)
    if scenario == "f4_patch56":
        from attnviz.workbench import patching
        words = "The keys to the old wooden cabinet that my grandmother left in the narrow hall by the door".split()
        clean = " ".join((words * 4)[:44]) + " are"
        corrupt = clean.replace("The keys", "The key", 1)
        return loaded, lambda: patching.patch(bench, model, name, clean, corrupt, " are", " is", "denoise")
    raise SystemExit(f"unknown scenario {scenario}")

loaded, work = run(sys.argv[1])
start, box, before = time.monotonic(), {}, os.times()
def go():
    try:
        work()
        box["outcome"] = "finished"
    except OverBudget as error:
        box["outcome"], box["message"] = "refused", str(error)
    except ValueError as error:
        box["outcome"], box["message"] = "refused", str(error)
thread = threading.Thread(target=go)
thread.start()
thread.join()
times = os.times()
print(json.dumps({"peak": status("VmHWM"), "after_load": loaded, "wall_s": time.monotonic() - start,
                  "cpu_s": times.user + times.system - before.user - before.system, **box}), flush=True)
"""

SCENARIOS = ("f1_clark", "f1_clark_long", "f4_sinks", "f4_patch56", "f4_three", "overhead")


def measure(tree: Path, scenario: str, budget: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), ATTNVIZ_MEMORY_BUDGET_GB=str(budget), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", WORKER, scenario], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"outcome": "crashed", "message": done.stderr.strip().splitlines()[-1:] or [""], "peak": 0}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a git revision to measure beside this tree")
    parser.add_argument("--budget", type=float, default=2.5, help="ATTNVIZ_MEMORY_BUDGET_GB (default 2.5)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    trees = [("after", ROOT)]
    with tempfile.TemporaryDirectory() as scratch:
        if args.before:
            before = Path(scratch) / "before"
            before.mkdir()
            archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
            trees.insert(0, ("before", before))
        print(f"budget {args.budget} GB; peak: the process's VmHWM, its model load included; wall, CPU: the work's")
        print(f"{'scenario':15} {'tree':7} {'peak GB':>8} {'wall s':>7} {'CPU s':>6}  outcome")
        for scenario in args.scenarios.split(","):
            for label, tree in trees:
                started = time.monotonic()
                found = measure(tree, scenario, args.budget)
                over = " OVER THE BUDGET" if found["peak"] > args.budget * 1e9 else ""
                message = f": {found['message']}" if found.get("message") else ""
                wall = found.get("wall_s", time.monotonic() - started)
                print(f"{scenario:15} {label:7} {found['peak'] / 1e9:8.2f} {wall:7.1f} {found.get('cpu_s', 0):6.1f}  "
                      f"{found['outcome']}{over}{message[:150]}", flush=True)


if __name__ == "__main__":
    main()
