"""One block of the reduced pass in torch's eager operations against the same block compiled by torch.compile
(a benchmark, not a test: what a fused kernel would save, measured for the choice of shipping one).

    .venv/bin/python benchmarks/bench_fused_block.py                      # 1,024, 2,400 and 3,700 columns
    .venv/bin/python benchmarks/bench_fused_block.py --columns 2400 --rounds 9

The block is SmolLM2's at 3,700 tokens (9 query heads over 3 KV heads, 64 rows, head dim 64): the scores, the
softmax, the context, and what the Explore page's reductions take of every probability, simplified (no masks or
diagonals): each row's entropy, the maxima of its chunks of 64 columns and its first maximum, its products with
three column weights (a total and a distance's two), and a pooling matmul of the rows. "eager" calls
attnviz.models.view_reductions' own functions, one torch operation a pass over the block; "compiled" is the same
mathematics given to `torch.compile(dynamic=True)`, whose inductor backend fuses the passes into C++ loops it
compiles here (it needs a C++ compiler on this machine; the first call's compile time is printed apart).
One thread; milliseconds of CPU a block, the least and the median of `--rounds` interleaved rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnviz.models.view_reductions import _chunk_maxima, _entropy, _row_products, first_index

HEADS, KV_HEADS, ROWS, DIM = 9, 3, 64, 64


def eager_block(q, k, v, weights, pooling):
    """q [K, n_rep * R, D] (scaled), k and v [K, C, D], weights [3, C] (the first: ones), pooling [H, cells, R]."""
    scores = torch.matmul(q, k.transpose(-2, -1)).view(HEADS, ROWS, -1)  # H, R, C
    probs = torch.softmax(scores, -1)
    chunks = _chunk_maxima(probs)  # H, R, n
    where = first_index(probs, chunks)  # H, R
    products = _row_products(probs, weights)  # the first: each row's total
    top = chunks.amax(-1)
    entropy = _entropy(probs, scores, top, where, products[0])  # written over the scores
    pooled = torch.bmm(pooling, probs)
    context = torch.matmul(probs.view(KV_HEADS, -1, probs.shape[-1]), v)
    return context, entropy, chunks, where, products, pooled


def fused_block(q, k, v, weights, pooling):
    """The same results as `eager_block`, written for a compiler (no in-place writes)."""
    scores = torch.matmul(q, k.transpose(-2, -1)).view(HEADS, ROWS, -1)
    shifted = scores - scores.amax(-1, keepdim=True)
    exp = shifted.exp()
    total = exp.sum(-1, keepdim=True)
    probs = exp / total
    entropy = torch.log(total[..., 0]) - (exp * shifted).sum(-1) / total[..., 0]
    chunks = _chunk_maxima(probs)
    where = first_index(probs, chunks)
    products = torch.einsum("hrc,mc->mhr", probs, weights)
    pooled = torch.bmm(pooling, probs)
    context = torch.matmul(probs.view(KV_HEADS, -1, probs.shape[-1]), v)
    return context, entropy, chunks, where, products, pooled


def block_inputs(columns: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    rep = HEADS // KV_HEADS
    return (torch.randn(KV_HEADS, rep * ROWS, DIM, generator=generator) / 8,
            torch.randn(KV_HEADS, columns, DIM, generator=generator),
            torch.randn(KV_HEADS, columns, DIM, generator=generator),
            torch.cat((torch.ones(1, columns), torch.rand(2, columns, generator=generator))),  # a total first
            torch.rand(HEADS, 6, ROWS, generator=generator))


def cpu_ms(function, args, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        function(*args)
    return (time.process_time() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, nargs="+", default=[1024, 2400, 3700])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="calls a round")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import torch._inductor.config as inductor

    inductor.compile_threads = 1  # one thread, as the eager side
    compiled = torch.compile(fused_block, dynamic=True)
    print(f"{'columns':>7} {'compile s':>9} {'eager ms':>15} {'compiled ms':>15} {'compiled / eager':>16} "
          f"{'max diff':>9}")
    for columns in args.columns:
        inputs = block_inputs(columns)
        with torch.inference_mode():
            start = time.process_time()
            results = compiled(*inputs)
            compile_s = time.process_time() - start
            differ = max(float((a - b).abs().max().float()) for a, b in zip(results, eager_block(*inputs)))
            eager, fused = [], []
            for _ in range(args.rounds):  # interleaved: a load on the machine falls on both alike
                eager.append(cpu_ms(eager_block, inputs, args.calls))
                fused.append(cpu_ms(compiled, inputs, args.calls))
        print(f"{columns:>7} {compile_s:>9.1f} {min(eager):>7.2f} {statistics.median(eager):>7.2f} "
              f"{min(fused):>7.2f} {statistics.median(fused):>7.2f} {min(fused) / min(eager):>16.2f} {differ:>9.1e}")
    print("(eager and compiled: the least, then the median of the rounds; compile s: the first call's CPU;\n"
          " max diff: the largest difference between the two sides' results)")


if __name__ == "__main__":
    main()
