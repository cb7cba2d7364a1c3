"""Retrieval heads of a decoder (Wu et al. 2024), measured (a benchmark, not a test): at each haystack length,
how many built-in needles the model's greedy reply retrieves (exact match of the answer); the retrieval-score
grid at one length; and retrieval with the top N heads switched off against N random heads (three seeds).

    .venv/bin/python benchmarks/retrieval_heads.py                                  # SmolLM2-135M-Instruct
    .venv/bin/python benchmarks/retrieval_heads.py --lengths 0,100,200 --grid-length 100 --off 5,10,20
    .venv/bin/python benchmarks/retrieval_heads.py --template plain --json out.json

Prompts: attnviz/interventions/needles.py (self-written filler and needles), the needle halfway in.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.analysis.retrieval import top_heads  # noqa: E402
from attnviz.interventions import retrieval as needle_work  # noqa: E402

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=SMOLLM)
    parser.add_argument("--lengths", type=ints, default=[0, 50, 100, 200, 400, 800], help="filler tokens")
    parser.add_argument("--grid-length", type=int, default=100, help="filler tokens of the grid and ablation")
    parser.add_argument("--off", type=ints, default=[5, 10, 20], help="heads switched off")
    parser.add_argument("--template", default="auto", choices=needle_work.TEMPLATES)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: a shared CPU is faster so)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = attnviz.load(args.model)
    report: dict = {"model": args.model, "template": args.template, "lengths": {}}
    print(f"{args.model}, template {args.template}")
    print("filler  tokens  retrieved  seconds  replies")
    for length in args.lengths:
        started = time.perf_counter()
        prompts = needle_work.prompts_for(model, length, template=args.template)
        runs = [needle_work.run_needle(model, p, record=False) for p in prompts]
        found = [run.answered for run in runs]
        report["lengths"][length] = {"tokens": [p.n_tokens for p in prompts], "answered": found,
                                     "replies": [run.continuation for run in runs]}
        print(f"{length:6d}  {max(p.n_tokens for p in prompts):6d}  {sum(found):4d} / {len(found)}  "
              f"{time.perf_counter() - started:7.1f}  {[run.continuation[:40] for run in runs]}", flush=True)

    prompts = needle_work.prompts_for(model, args.grid_length, template=args.template)
    result = needle_work.retrieval_heads(model, prompts)
    print(f"\ngrid at {args.grid_length} filler tokens: {result.n_answered} of {len(prompts)} answered")
    if result.grid is None:
        print("no needle retrieved: no grid")
        return 1
    grid = result.grid
    best = top_heads(grid, 20)
    print(f"heads with score >= 0.1: {(grid >= 0.1).sum()} of {grid.size} ({(grid >= 0.1).mean():.1%})")
    print("top 20:", ", ".join(f"{layer}.{head}={grid[layer, head]:.2f}" for layer, head in best))
    report["grid"] = {"filler": args.grid_length, "answered": result.n_answered, "scores": grid.tolist()}
    report["ablation"] = []
    print("\nheads off  all on  top off  random off (3 seeds)")
    for n_off in args.off:
        c = needle_work.ablation_comparison(model, prompts, grid, n_off)
        n = len(prompts)
        print(f"{n_off:9d}  {sum(c.answered_all_on)} / {n}   {sum(c.answered_top_off)} / {n}    "
              f"{[sum(row) for row in c.answered_random_off]} of {n} each (mean {c.random_rate:.2f})", flush=True)
        report["ablation"].append({"n_off": n_off, "top": c.top, "all_on": c.answered_all_on,
                                   "top_off": c.answered_top_off, "random": c.random,
                                   "random_off": c.answered_random_off})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
