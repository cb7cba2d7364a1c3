"""Which heads' ablation most reduces a decoder's BLiMP preference (a measurement, not a test).

On the first `--pairs` pairs of a BLiMP file (default: distractor_agreement_relational_noun, 100 pairs),
every head is switched off alone (its output zeroed before o_proj) and the prefix method's preference
is measured again: accuracy (share of pairs with log P(good word | prefix) > log P(bad word | prefix))
and the mean margin (good - bad, nats), which is smoother: accuracy moves only when a pair flips.
Reported: both drops per head (unablated minus ablated; positive = the head helps) and the top heads
by each. One forward pass per pair holds both sentences times `--heads-per-pass` ablations as batch
rows, one [L, B, H] head mask row each (attnviz.readouts.preference.continuation_batch).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/blimp_ablation.py [--model HuggingFaceTB/SmolLM2-135M-Instruct]
        [--file ../shared/data/blimp/distractor_agreement_relational_noun.jsonl] [--pairs 100] [--top 10]
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.analysis.blimp_jsonl import read_pairs  # noqa: E402
from attnviz.analysis.reference_data import data_path  # noqa: E402
from attnviz.readouts import predictions  # noqa: E402
from attnviz.readouts.preference import continuation_batch, decoder_requests  # noqa: E402

DEFAULT_FILE = "distractor_agreement_relational_noun.jsonl"


def ablation_margins(model, pairs, heads_per_pass: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(margins [P] unablated, margins [P, L, H] with head (l, h) alone switched off)."""
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    total = n_layers * n_heads
    rows = []
    for pair in pairs:
        if not pair.has_prefix:
            raise ValueError(f"pair {pair.id}: the prefix method needs one_prefix fields")
        (good, bad), _ = decoder_requests(model, pair)
        rows.append((predictions.continuation_ids(model, *good), predictions.continuation_ids(model, *bad)))
    base = continuation_batch(model, [r for pair_rows in rows for r in pair_rows])
    base_margins = base[0::2] - base[1::2]
    ablated = np.empty((len(pairs), total))
    for p, (good, bad) in enumerate(rows):
        for start in range(0, total, heads_per_pass):
            heads = range(start, min(start + heads_per_pass, total))
            # rows: the good sentence under each ablation, then the bad one under the same ablations
            mask = np.ones((n_layers, 2 * len(heads), n_heads), dtype=np.float32)
            for b, head in enumerate(heads):
                mask[head // n_heads, b, head % n_heads] = 0
                mask[head // n_heads, len(heads) + b, head % n_heads] = 0
            scores = continuation_batch(model, [good] * len(heads) + [bad] * len(heads), head_mask=mask)
            ablated[p, start : heads.stop] = scores[: len(heads)] - scores[len(heads):]
        if progress is not None:
            progress(p + 1, len(pairs))
    return base_margins, ablated.reshape(len(pairs), n_layers, n_heads)


def ranking(drop: np.ndarray, top: int) -> list[dict]:
    order = np.argsort(-drop, axis=None, kind="stable")[:top]
    return [{"layer": int(i // drop.shape[1]), "head": int(i % drop.shape[1]), "drop": round(float(drop.flat[i]), 4)}
            for i in order]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--file", default=str(data_path("blimp", DEFAULT_FILE)))
    parser.add_argument("--pairs", type=int, default=100, help="the first N pairs of the file")
    parser.add_argument("--heads-per-pass", type=int, default=270, help="ablations per forward pass (x2 rows)")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--json", help="also write every head's drops to this file")
    args = parser.parse_args()

    import torch

    start = time.perf_counter()
    pairs = read_pairs(args.file, limit=args.pairs)
    model = attnviz.load(args.model)
    loaded = time.perf_counter()
    print(f"{args.model}: {model.info.n_layers} x {model.info.n_heads} heads; {len(pairs)} pairs of "
          f"{Path(args.file).name}; torch threads {torch.get_num_threads()}; load {loaded - start:.1f} s",
          file=sys.stderr)

    def progress(done: int, total: int) -> None:
        elapsed = time.perf_counter() - loaded
        print(f"pair {done}/{total}  {elapsed:.0f} s (about {elapsed / done * (total - done):.0f} s left)",
              file=sys.stderr)

    base, ablated = ablation_margins(model, pairs, args.heads_per_pass, progress)
    seconds = time.perf_counter() - loaded
    base_accuracy, base_margin = float((base > 0).mean()), float(base.mean())
    accuracy_drop = base_accuracy - (ablated > 0).mean(axis=0)  # L, H
    margin_drop = base_margin - ablated.mean(axis=0)  # L, H
    # Accuracy is coarse (steps of 1/P): ties are broken by the margin drop.
    by_accuracy = np.lexsort((-margin_drop.ravel(), -accuracy_drop.ravel()))[: args.top]
    result = {
        "model": args.model, "file": Path(args.file).name, "pairs": len(pairs),
        "heads": int(ablated.shape[1] * ablated.shape[2]), "seconds": round(seconds, 1),
        "base_accuracy": round(base_accuracy, 4), "base_mean_margin": round(base_margin, 4),
        "top_by_accuracy_drop": [
            {"layer": int(i // margin_drop.shape[1]), "head": int(i % margin_drop.shape[1]),
             "accuracy_drop": round(float(accuracy_drop.flat[i]), 4),
             "margin_drop": round(float(margin_drop.flat[i]), 4)}
            for i in by_accuracy],
        "top_by_margin_drop": ranking(margin_drop, args.top),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result | {"accuracy_drop": accuracy_drop.round(4).tolist(),
                                                         "margin_drop": margin_drop.round(4).tolist()}))
    print(f"{len(pairs)} pairs x {result['heads']} heads in {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
