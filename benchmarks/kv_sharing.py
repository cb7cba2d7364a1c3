"""Shared keys and values on a real model, one sentence (the numbers the Learn page shows, for a note):

- an MHA model: mean-pool its K/V heads into g groups (Ainslie et al. 2023, no retraining) and print, per
  g, how far the attention maps (mean JS distance over layers, heads and rows; the largest per-layer max
  |diff|) and the final hidden states (relative L2, mean cosine) move; with --per-layer, every layer;
- a GQA/MQA model: per layer, the mean JS distance between heads within a KV group and across groups,
  with the permutation p-value (attnviz/analysis/kv_groups.py; the first row left out for decoders).

    .venv/bin/python benchmarks/kv_sharing.py --model sentence-transformers/all-MiniLM-L6-v2 --groups 1,2,3,4,6,12
    .venv/bin/python benchmarks/kv_sharing.py --model HuggingFaceTB/SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.analysis.kv_groups import group_distances  # noqa: E402
from attnviz.attention_kinds.gqa_conversion import conversion_distances, group_choices  # noqa: E402

SENTENCE = "The keys to the cabinet are on the table because Mary put them there this morning."


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", default=SENTENCE)
    parser.add_argument("--groups", help="g values to pool into (MHA models; default: every divisor)")
    parser.add_argument("--per-layer", action="store_true")
    parser.add_argument("--permutations", type=int, default=999)
    args = parser.parse_args(argv)
    model = attnviz.load(args.model)
    info = model.info
    enc = model.encode(args.text)
    print(f"{args.model}: {info.n_layers} layers, {info.n_heads} heads, {info.n_kv_heads} KV heads "
          f"({info.attention_kind}); {len(enc.ids)} tokens of: {args.text}")
    if info.attention_kind == "MHA":
        groups = [int(g) for g in args.groups.split(",")] if args.groups else group_choices(info.n_kv_heads)
        print(f"{'g':>3} {'mean JS':>8} {'worst layer JS':>15} {'max |d attn|':>12} {'hidden rel L2':>14} "
              f"{'cosine':>8}")
        for g in sorted(groups, reverse=True):
            r = conversion_distances(model.module, enc.ids, g, enc.type_ids)
            print(f"{g:>3} {r.js_mean.mean():>8.4f} {r.js_mean.max():>15.4f} {r.max_abs.max():>12.4f} "
                  f"{r.hidden_relative_l2:>14.4f} {r.hidden_cosine:>8.4f}")
            if args.per_layer:
                print("    per layer mean JS: " + " ".join(f"{v:.4f}" for v in r.js_mean))
        return 0
    trace = model.run(args.text)
    rows = slice(1, None) if info.causal else None
    r = group_distances(trace.attentions, trace.kv_group, rows=rows, permutations=args.permutations)
    print(f"head pairs per layer: {r.n_within_pairs} within a KV group, {r.n_across_pairs} across; "
          f"p: share of {r.permutations} random regroupings with a within-group mean as small")
    print(f"{'layer':>5} {'within':>7} {'across':>7} {'p':>6}")
    for layer, (w, a, p) in enumerate(zip(r.within, r.across, r.p_value)):
        print(f"{layer:>5} {w:>7.4f} {a:>7.4f} {p:>6.3f}")
    closer = int(np.sum(r.within < r.across))
    print(f"mean within {np.nanmean(r.within):.4f}, across {np.nanmean(r.across):.4f}; within < across in "
          f"{closer} of {len(r.within)} layers; p < 0.05 in {int(np.sum(r.p_value < 0.05))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
