"""GQA/MQA without copies: the forward pass with the grouped kernel against the old `repeat_kv` kernel,
side by side in one run.

    .venv/bin/python benchmarks/bench_forward.py [--models smollm2 gemma3] [--lengths 128 512] [--repeats 3]

"Before" is the same module with the kernel fed keys and values repeated to every query head
(`repeat_kv`, HF eager's way, what attnviz did before); "after" is the kernel as it is (one batched
matmul per KV head group). The two run interleaved, the order alternating, so a busier moment of this
shared machine falls on both; each figure is the median of `repeats` runs, in wall seconds and in CPU
seconds of this process (`time.process_time`). A single-layer kernel case at S = 4096 shows the copy's cost
where it is largest. The last column is the largest difference between the two kernels' attentions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.transformer import attention  # noqa: E402
from attnviz.transformer.record import Recorder  # noqa: E402

MODELS = {"smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct", "gemma3": "google/gemma-3-270m"}
ORIGINAL_KERNEL = attention.ATTENTION_FUNCTIONS["full"]  # swapped in the registry the model picks from


def repeat_kv_kernel(q, k, v, *args, **kwargs):
    """The kernel as it was: keys and values copied out to every query head first."""
    n_rep = q.shape[1] // k.shape[1]
    return ORIGINAL_KERNEL(q, attention.repeat_kv(k, n_rep), attention.repeat_kv(v, n_rep), *args, **kwargs)


KERNELS = {"repeat_kv (before)": repeat_kv_kernel, "grouped (after)": ORIGINAL_KERNEL}


def timed(run) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def compare(label: str, run, repeats: int) -> None:
    times = {name: [] for name in KERNELS}
    outputs = {}
    for round_ in range(repeats + 1):  # round 0 warms up and is not counted
        names = list(KERNELS) if round_ % 2 else list(reversed(KERNELS))
        for name in names:
            attention.ATTENTION_FUNCTIONS["full"] = KERNELS[name]
            try:
                wall, cpu, out = timed(run)
            finally:
                attention.ATTENTION_FUNCTIONS["full"] = ORIGINAL_KERNEL
            outputs[name] = out
            if round_:
                times[name].append((wall, cpu))
    before, after = (outputs[name] for name in KERNELS)
    diff = (before - after).abs().max().item()
    cells = []
    for name in KERNELS:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        cells.append(f"{wall:8.3f} s wall {cpu:8.3f} s CPU")
    speedup = statistics.median(c for _, c in times["repeat_kv (before)"]) / max(
        1e-9, statistics.median(c for _, c in times["grouped (after)"]))
    print(f"{label:<44} | {cells[0]} | {cells[1]} | {speedup:5.2f}x CPU | max |diff| {diff:.1e}", flush=True)


def kernel_case(heads: int, kv_heads: int, queries: int, length: int, dim: int, repeats: int) -> None:
    """One layer's kernel: `queries` = length is a whole forward pass, 1 a decoding step on a cache."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, heads, queries, dim, generator=g)
    k = torch.randn(1, kv_heads, length, dim, generator=g)
    v = torch.randn(1, kv_heads, length, dim, generator=g)
    causal = torch.ones(queries, length, dtype=torch.bool).tril(length - queries)
    steps = 1 if queries > 1 else 50  # a decoding step is short: time 50 of them

    def run():
        for _ in range(steps):
            out = attention.scaled_dot_product_attention(q, k, v, causal)[0]
        return out

    what = "forward" if queries > 1 else f"{steps} decode steps"
    compare(f"kernel H={heads} K={kv_heads} S={length} {what}", run, repeats)


@torch.inference_mode()
def model_case(model, length: int, repeats: int) -> None:
    ids = torch.randint(10, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))
    compare(f"{model.info.name.split('/')[-1]} T={length}",
            lambda: model.module(ids, with_logits=False, record=Recorder("attentions")).attentions, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["smollm2"], choices=sorted(MODELS))
    parser.add_argument("--lengths", nargs="*", type=int, default=[128, 512])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; medians of {args.repeats} runs")
    print(f"{'case':<44} | {'repeat_kv (before)':<34} | {'grouped (after)':<34} |")
    for queries in (4096, 1):
        kernel_case(9, 3, queries, 4096, 64, args.repeats)  # SmolLM2's layer shape
        kernel_case(4, 1, queries, 4096, 256, args.repeats)  # Gemma 3 270M's
    for key in args.models:
        model = attnviz.load(MODELS[key], max_tokens=max(args.lengths))
        for length in args.lengths:
            model_case(model, length, args.repeats)


if __name__ == "__main__":
    main()
