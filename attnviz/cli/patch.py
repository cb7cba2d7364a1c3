"""`python -m attnviz patch`: activation patching on one minimal pair (attnviz.interventions.patching): every
head's, every MLP's and the residual stream's normalised effect (0 = the corrupted run, 1 = the clean run)."""

from __future__ import annotations

import json
import sys
import time

import attnviz


def add_parser(commands) -> None:
    patch = commands.add_parser("patch", help="activation patching on a minimal pair: heads, MLPs, residual stream")
    patch.add_argument("--model", required=True)
    patch.add_argument("--clean", required=True, help="the clean sentence, e.g. 'The keys to the cabinet'")
    patch.add_argument("--corrupt", required=True, help="the corrupted sentence, e.g. 'The key to the cabinet'")
    patch.add_argument("--target", help="one token the clean run should prefer, e.g. ' are' (mind the space)")
    patch.add_argument("--contrast", help="one token to subtract, e.g. ' is': the metric is their logit difference")
    patch.add_argument("--direction", choices=("denoise", "noise"), default="denoise",
                       help="denoise: the clean run's activations into the corrupted run; noise: the other way")
    patch.add_argument("--json", action="store_true", help="print the result as JSON (fields: docs/cli.md)")


def _rounded(values):
    """Nested lists of floats, 6 decimals, NaN (an unaligned position) as null."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, list):
        return [_rounded(v) for v in values]
    return None if values != values else round(float(values), 6)


def run(args) -> int:
    from attnviz.interventions import patching

    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    pair = patching.patch_pair(model, args.clean, args.corrupt, args.target, args.contrast)
    loaded = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 256 == 0:
            print(f"patched {done}/{total}", file=sys.stderr)

    result = patching.patch(model, pair, args.direction, progress=progress)
    print(f"load {loaded - start:.1f} s, patching {time.perf_counter() - loaded:.1f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "model": args.model, "direction": result.direction, "metric": pair.metric,
            "target_id": pair.target_id, "contrast_id": pair.contrast_id,
            "clean_value": _rounded(result.clean_value), "corrupt_value": _rounded(result.corrupt_value),
            "tokens": list(result.tokens), "clean_tokens": list(pair.clean_tokens),
            "corrupt_tokens": list(pair.corrupt_tokens), "aligned": [list(p) for p in pair.pairs],
            "heads": _rounded(result.heads), "mlps": _rounded(result.mlps), "residual": _rounded(result.residual),
        }))
        return 0
    print(f"{args.model}, {result.direction}: clean {result.clean_value:.4f}, corrupted {result.corrupt_value:.4f}"
          f" ({pair.metric}); 0 = corrupted, 1 = clean")
    top = sorted(((float(v), layer, head) for (layer, head), v in _items(result.heads)), reverse=True)[:5]
    print("heads, largest effect (layer, head, 0-based): " + ", ".join(f"L{la}H{h} {v:.3f}" for v, la, h in top))
    print("MLPs: " + " ".join(f"{v:.2f}" for v in result.mlps))
    return 0


def _items(grid):
    for layer, row in enumerate(grid):
        for head, value in enumerate(row):
            yield (layer, head), value
