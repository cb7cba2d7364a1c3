"""Attribution patching against exact activation patching on SmolLM2-135M (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_attribution_patching.py               # CPU seconds, side by side
    .venv/bin/python benchmarks/bench_attribution_patching.py --agreement   # every grid against the exact one

CPU seconds (`time.process_time()`, `torch.set_num_threads(1)`) on bench_patching.py's 12-token pair, the median
and minimum of --rounds rounds after one warm-up, each case measured in turn inside each round: the exact heads grid
(`patching.heads`, 270 patched runs), the same with the metric read from every logit (as before
`patching.metric_function` read two rows of the head), the attribution heads grid (`attribution_patching.estimate`:
one forward and one backward, every grid at once) and the estimate with its top 10 heads patched exactly
(`check_top`). All start from the same `patching.prepare` (both runs recorded), timed on its own line.

--agreement: for each built-in pair (attnviz/probesets/patch_pairs.jsonl) SmolLM2 can score, both directions,
each grid's estimate against the exact grid (Pearson r, and how many of the estimate's top 10 cells by
|effect| are among the exact top 10; heads x positions patches L x H x T runs, the slow part), then the mean
and the range over the pairs (docs/views/patching.md, "Attribution patching").
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.interventions import attribution_patching as ap  # noqa: E402
from attnviz.interventions import patching  # noqa: E402
from attnviz.probesets.patch_pairs import builtin_patch_pairs  # noqa: E402

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
PAIR = ("The keys to the cabinet in the hall of the old house", "The key to the cabinet in the hall of the old house",
        " are", " is")  # bench_patching.py's DECODER_PAIR


def full_logit_metric(module, pair, hidden, position) -> np.ndarray:
    """The metric as patching read it before the two-row metric: every logit, then two of them."""
    logits = module.unembed(hidden[:, position]).double()
    return (logits[:, pair.target_id] - logits[:, pair.contrast_id]).cpu().numpy()


def cpu(run) -> tuple[float, object]:
    start = time.process_time()
    result = run()
    return time.process_time() - start, result


def timings(model, rounds: int, k: int) -> None:
    pair = patching.patch_pair(model, *PAIR)
    runs = patching.prepare(model.module, pair)
    full_logits = dataclasses.replace(runs, score=lambda hidden: full_logit_metric(model.module, pair, hidden,
                                                                                    runs.position))
    cases = {
        "prepare (both runs recorded)": lambda: patching.prepare(model.module, pair),
        "exact heads grid, full logits (before)": lambda: patching.heads(full_logits),
        "exact heads grid (patching.heads)": lambda: patching.heads(runs),
        "attribution, every grid (estimate)": lambda: ap.estimate(runs),
        f"attribution + exact check of top {k}": lambda: ap.check_top(runs, ap.estimate(runs).heads, k),
    }
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    results = {}
    for round_ in range(rounds + 1):  # round 0 warms up
        for name, run in cases.items():
            spent, results[name] = cpu(run)
            if round_:
                seconds[name].append(spent)
    exact, estimate = results["exact heads grid (patching.heads)"], results["attribution, every grid (estimate)"]
    checked = results[f"attribution + exact check of top {k}"]
    # The minimum beside the median: on a shared machine other processes only ever add CPU time (cache, SMT).
    print(f"SmolLM2-135M, {len(pair.corrupt_ids)} tokens, 1 thread, {rounds} rounds, CPU-s: median (minimum)")
    base = statistics.median(seconds["exact heads grid (patching.heads)"])
    for name, values in seconds.items():
        median = statistics.median(values)
        ratio = f"   {base / median:5.1f}x faster than exact" if name.startswith("attribution") else \
            f"   (two rows: {median / base:.2f}x faster)" if name.startswith("exact heads grid,") else ""
        print(f"  {name:42s} {median:7.3f} ({min(values):6.3f}){ratio}")
    before = results["exact heads grid, full logits (before)"]
    print(f"two rows against full logits: max |difference| {np.abs(before - exact).max():.1e}")
    agree = ap.agreement(estimate.heads, exact, k)
    drift = np.abs(checked.exact - np.array([exact[c] for c in checked.cells])).max()
    print(f"heads: r {agree.r:.3f}, {agree.overlap} of the top {k}; check_top against patching.heads: "
          f"max |difference| {drift:.1e}")


def agreements(model, k: int) -> None:
    rows: dict[str, list] = {grid: [] for grid in ap.GRIDS}
    print(f"{'pair':12s} {'direction':9s} " + " ".join(f"{grid:>18s}" for grid in ap.GRIDS))
    for spec in builtin_patch_pairs():
        try:
            pair = patching.patch_pair(model, spec.clean, spec.corrupt, spec.target, spec.contrast)
            for direction in patching.DIRECTIONS:
                runs, estimate = ap.attribution_patch(model, pair, direction)
                cells = []
                for grid in ap.GRIDS:
                    agree = ap.agreement(estimate.grid(grid), ap.exact_grid(runs, grid), k)
                    rows[grid].append(agree)
                    cells.append(f"r {agree.r:5.2f}, {agree.overlap:2d}/{agree.k:<2d}")
                print(f"{spec.id:12s} {direction:9s} " + " ".join(f"{cell:>18s}" for cell in cells), flush=True)
        except ValueError as error:
            print(f"{spec.id:12s} skipped: {error}")
    print(f"{'mean':12s} {'':9s} " + " ".join(
        f"{f'r {np.nanmean([a.r for a in v]):5.2f}, {np.mean([a.overlap for a in v]):4.1f}':>18s}"
        for v in rows.values()))
    print(f"{'range of r':12s} {'':9s} " + " ".join(
        f"{f'{np.nanmin([a.r for a in v]):5.2f} .. {np.nanmax([a.r for a in v]):4.2f}':>18s}" for v in rows.values()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--agreement", action="store_true", help="every grid against the exact one, built-in pairs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model = attnviz.load(SMOLLM)
    if args.agreement:
        agreements(model, args.k)
    else:
        timings(model, args.rounds, args.k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
