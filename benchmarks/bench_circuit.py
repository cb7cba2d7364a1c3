"""A circuit of heads on SmolLM2-135M (a benchmark, not a test): what edge scoring costs, how faithful the circuits
of the top edges are against random circuits of their size, and how the edge scores agree with exact patching.

    .venv/bin/python benchmarks/bench_circuit.py                      # the issue's pair (en-agree-1)
    .venv/bin/python benchmarks/bench_circuit.py --pair en-agree-2    # another built-in pair
    .venv/bin/python benchmarks/bench_circuit.py --all                # every built-in pair SmolLM2 can score

One thread (`torch.set_num_threads(1)`), CPU seconds (`time.process_time()`), the median and minimum of --rounds
rounds after a warm-up: preparing both runs (`circuit.prepare`), the edge scores with plain EAP (steps=1) and with
EAP-IG (steps=5), one batch of 21 path-patched passes (a circuit and 2 x 10 controls). Then, with EAP-IG's scores:
the faithfulness of the circuits of about 20, 50, 100, 200 and 500 edges beside 10 random circuits of each kind of
the same size (random paths from the embedding to the logits; edges drawn uniformly); and both scores' agreement
with exact single-edge patching: the top --check edges by |score| patched alone (Pearson r), and, patching the top
--pool edges, how many of the exact top 30 among them each score's top 30 holds (docs/views/circuit.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.interventions import attribution_patching as ap  # noqa: E402
from attnviz.interventions import circuit as circuits  # noqa: E402
from attnviz.interventions import patching  # noqa: E402
from attnviz.probesets.patch_pairs import builtin_patch_pairs  # noqa: E402

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
SIZES = (20, 50, 100, 200, 500)


def cpu(run) -> tuple[float, object]:
    start = time.process_time()
    result = run()
    return time.process_time() - start, result


def timings(module, pair, rounds: int) -> None:
    runs = circuits.prepare(module, pair)
    masks = np.stack([circuits.all_edges(runs.graph)] * 21)
    cases = {"prepare (both runs, every node)": lambda: circuits.prepare(module, pair),
             "edge scores, EAP (steps=1)": lambda: circuits.edge_scores(runs, 1),
             "edge scores, EAP-IG (steps=5)": lambda: circuits.edge_scores(runs, 5),
             "21 path-patched passes": lambda: circuits.path_patch(runs, masks)}
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(rounds + 1):  # round 0 warms up
        for name, run in cases.items():
            spent, _ = cpu(run)
            if round_:
                seconds[name].append(spent)
    print(f"  CPU-s, 1 thread, median (minimum) of {rounds}:")
    for name, values in seconds.items():
        print(f"    {name:34s} {statistics.median(values):6.2f} ({min(values):.2f})")


def quality(module, pair, samples: int, check: int, pool: int) -> None:
    runs = circuits.prepare(module, pair)
    scores = {steps: circuits.edge_scores(runs, steps) for steps in (1, 5)}
    edges = scores[5]
    print(f"  clean {runs.clean_value:.3f}, corrupted {runs.corrupt_value:.3f}; {runs.graph.n_nodes} nodes, "
          f"{int(runs.graph.valid().sum())} edges")
    print("  faithfulness (EAP-IG): size -> edges kept (of the top n), circuit | random paths mean (max) | uniform "
          "mean (max)")
    for size in SIZES:
        chosen = circuits.circuit(edges, size)
        n = max(1, len(chosen.edges))
        masks = [chosen.mask(), *circuits.random_circuits(runs.graph, n, samples, "paths"),
                 *circuits.random_circuits(runs.graph, n, samples, "edges")]
        values = circuits.faithfulness(runs, masks)
        paths, uniform = values[1 : 1 + samples], values[1 + samples :]
        print(f"    {size:4d} -> {len(chosen.edges):4d} (top {chosen.top:4d}): {values[0]:6.3f} | {paths.mean():6.3f} "
              f"({paths.max():.3f}) | {uniform.mean():6.3f} ({uniform.max():.3f})")
    union = []
    for steps in (1, 5):
        for edge in scores[steps].top(pool):
            if edge not in union:
                union.append(edge)
    exact = dict(zip(union, circuits.edge_effects(runs, union)))
    exact_top = sorted(union, key=lambda e: -abs(exact[e]))[:30]
    for steps, name in ((1, "EAP"), (5, "EAP-IG")):
        top = scores[steps].top(check)
        approx = np.array([scores[steps].scores[e] for e in top])
        values = np.array([exact[e] for e in top])
        found = ap.agreement(approx, values, len(top))
        overlap = len(set(scores[steps].top(30)) & set(exact_top))
        print(f"  {name:6s} top {check} edges against exact single-edge patching: r {found.r:.3f}; of the exact top 30 "
              f"among the {len(union)} patched, the score's top 30 holds {overlap}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="en-agree-1", help="a built-in pair's id")
    parser.add_argument("--all", action="store_true", help="every built-in pair SmolLM2 can score")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10, help="random circuits of each kind per size")
    parser.add_argument("--check", type=int, default=30, help="top edges whose r is reported")
    parser.add_argument("--pool", type=int, default=150, help="top edges of each score patched for the overlap")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = attnviz.load(SMOLLM)
    specs = [s for s in builtin_patch_pairs() if args.all or s.id == args.pair]
    for index, spec in enumerate(specs):
        try:
            pair = patching.patch_pair(model, spec.clean, spec.corrupt, spec.target, spec.contrast)
        except ValueError as error:
            print(f"{spec.id}: skipped ({error})")
            continue
        print(f"{spec.id}: {spec.clean!r} / {spec.corrupt!r}, {spec.target!r} - {spec.contrast!r}, "
              f"{len(pair.corrupt_ids)} tokens, denoising")
        if index == 0:
            timings(model.module, pair, args.rounds)
        quality(model.module, pair, args.samples, args.check, args.pool)


if __name__ == "__main__":
    main()
