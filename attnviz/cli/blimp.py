"""`python -m attnviz blimp`: how often a model prefers the grammatical sentence of each minimal pair
(BLiMP's files or the built-in pairs), per file, with the mean margin in nats."""

from __future__ import annotations

import json
import sys
import time

import attnviz
from attnviz.analysis.blimp_jsonl import read_pairs
from attnviz.readouts.preference import NOT_AVAILABLE, FileResult, builtin_pairs, data_files, score_pairs


def run_blimp_command(args) -> int:
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be >= 1, got {args.limit}")
    files = data_files(args.data)
    inputs = [(name, builtin_pairs(name.partition(":")[2]) if path is None else read_pairs(path, limit=args.limit))
              for name, path in files]
    inputs = [(name, pairs[: args.limit] if args.limit else pairs) for name, pairs in inputs]
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    if not model.config.causal and not inputs.has_mlm_head(model):
        raise ValueError(NOT_AVAILABLE)
    loaded = time.perf_counter()
    results = []
    for name, pairs in inputs:
        def progress(done: int, total: int, name=name) -> None:
            if done == total or done % 320 == 0:
                print(f"{name}: {done}/{total}", file=sys.stderr)

        results.append(score_pairs(model, name, pairs, progress))
    end = time.perf_counter()
    print(f"load {loaded - start:.1f} s, scoring {end - loaded:.1f} s", file=sys.stderr)
    overall = FileResult("all", sum(r.n for r in results), sum(r.correct for r in results),
                         [m for r in results for m in r.margins], {})
    for r in results:
        for method, count in r.methods.items():
            overall.methods[method] = overall.methods.get(method, 0) + count
    if args.json:
        print(json.dumps({"model": args.model, "data": args.data, "limit": args.limit, "metric": "sum",
                          "files": {r.name: r.to_json() for r in results}, "overall": overall.to_json()}))
        return 0
    print(f"model: {args.model}  (accuracy = share of pairs whose good sentence scores higher; margin = mean "
          "log-prob good - bad, nats)")
    print("metric: BLiMP's own, the summed log-probability of each side, whatever its token count (the Explore "
          "page compares per-token means when the counts differ)")
    print(f"{'file':45s} {'n':>6s} {'accuracy':>9s} {'margin':>8s}  method")
    for r in [*results, overall]:
        methods = ", ".join(f"{m} {c}" for m, c in r.methods.items())
        print(f"{r.name:45s} {r.n:6d} {r.accuracy:9.3f} {r.mean_margin:8.3f}  {methods}")
    return 0
