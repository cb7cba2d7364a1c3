"""MHA, GQA and MQA measured side by side (a benchmark, not a test): parameters, the bytes the KV cache
tensors hold after decoding N tokens beside the formula (1, g/h, 1/h of MHA), and the median time of one
decoding step at a few cache lengths, the three variants interleaved in one run
(attnviz/interventions/variants.py).

    .venv/bin/python benchmarks/bench_kv_variants.py                                       # 512 / 8 heads / 2 groups
    .venv/bin/python benchmarks/bench_kv_variants.py --d-model 576 --heads 9 --groups 3     # SmolLM2-like
    .venv/bin/python benchmarks/bench_kv_variants.py --threads 1 --json out.json

Each variant is a stack of --layers attention layers (pre-norm residual, no MLP, no positions) on random
inputs; times are per token, for all layers together, on this machine's CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnviz.attention_kinds.variants import NAMED_MODELS, UNPUBLISHED, compare, format_table  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--groups", type=int, default=2, help="KV heads of the GQA variant")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=256, help="tokens decoded before the cache is measured")
    parser.add_argument("--lengths", default="64,256,1024", help="cache lengths at which a step is timed")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--names", action="store_true", help="also print the models that use each variant")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = tuple(int(n) for n in args.lengths.split(","))
    result = compare(args.d_model, args.heads, args.groups, args.layers, args.tokens, lengths, args.repeats,
                     getattr(torch, args.dtype))
    print(f"d_model {result.d_model}, {result.n_heads} heads, GQA with {result.n_groups} groups, "
          f"{result.n_layers} layers, cache measured after {result.n_tokens} tokens, {result.dtype}, "
          f"torch threads {result.threads}; step times: median of {result.repeats}, interleaved")
    print(format_table(result))
    if args.names:
        for variant, models in NAMED_MODELS.items():
            print(f"{variant}: " + "; ".join(f"{name} ({q} query heads, {k} KV)" for name, q, k in models))
        print(UNPUBLISHED)
    if args.json:
        Path(args.json).write_text(json.dumps(dataclasses.asdict(result), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
