"""Head Finder, built-in sets: scored for every request (before) against scored once per model and shared by every
visitor (after, workbench.finder.score(..., builtin=...)). A benchmark, not a test.

For each relation of a built-in set, two visitors ask in turn for the same scores through one Workbench, as two
sessions of the app would. Before: each request scores the set (what the page did). After: the first request
scores it and keeps it in the views store, the second reads it. Printed side by side per relation and visitor:
CPU seconds of this process (time.process_time: every thread, so torch's too) and wall seconds.

    .venv/bin/python benchmarks/bench_finder_shared.py [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--set builtin:zh]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnviz.probesets import builtin_items  # noqa: E402
from attnviz.workbench import Workbench, finder, shelf  # noqa: E402


def timed(call) -> tuple[float, float, dict]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--set", default="builtin:zh", choices=["builtin:en", "builtin:zh"])
    parser.add_argument("--sink-aware", action="store_true")
    args = parser.parse_args()

    bench = Workbench()
    model = shelf.load_model(bench, shelf.check_source(args.model))
    items = builtin_items(args.set)
    relations = list(dict.fromkeys(item.relation for item in items))
    print(f"{args.model}, {args.set}, sink_aware={args.sink_aware}: CPU s / wall s per request")
    print(f"{'relation':<14} {'visitor':<8} {'before CPU':>10} {'before wall':>11} {'after CPU':>10} "
          f"{'after wall':>10}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for relation in relations:
        chosen = [item for item in items if item.relation == relation]

        def request(shared: bool, chosen=chosen, relation=relation):
            return finder.score(bench, model, args.model, chosen, relation, args.sink_aware,
                                builtin=args.set if shared else None)

        rows = [timed(lambda: request(False)) for _ in (1, 2)]  # before: every request scores
        after = [timed(lambda: request(True)) for _ in (1, 2)]  # after: shared per model, set, relation, rule
        assert after[0][2] == after[1][2] == rows[0][2], "shared scores must equal the computed ones"
        for visitor, (b, a) in enumerate(zip(rows, after), start=1):
            print(f"{relation:<14} {visitor:<8} {b[0]:>10.2f} {b[1]:>11.2f} {a[0]:>10.2f} {a[1]:>10.2f}", flush=True)
            totals = [totals[0] + b[0], totals[1] + b[1], totals[2] + a[0], totals[3] + a[1]]
    print(f"{'total':<14} {'both':<8} {totals[0]:>10.2f} {totals[1]:>11.2f} {totals[2]:>10.2f} {totals[3]:>10.2f}")


if __name__ == "__main__":
    main()
