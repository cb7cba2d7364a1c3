"""Every view of a long text against a plain forward, side by side in one run (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_long_pass.py --before /work/main        # T = 1024, 3700, 8192; twice each
    .venv/bin/python benchmarks/bench_long_pass.py --lengths 3700 --repeats 1 --modes sdpa after

On SmolLM2 (offline), one thread, the same T random token ids for every row, each row in a fresh process:

- "sdpa":   Hugging Face's base model (no LM head) with attn_implementation="sdpa": the forward, no maps;
- "eager":  the same with "eager" (each layer's [H, T, T] map made, not returned);
- "before": attnviz.models.reduced_pass.reduced_trace (every view of the Explore page: the mosaic tiles at
            SmolLM2's 34 cells a side, the head profile, float16 queries and keys) imported from the
            `--before` tree (a checkout of main), so the old code runs beside the new in one run;
- "after":  the same from this tree;
- "probs":  the floor under "after": this tree's row kernel (attnviz.transformer.attention.row_blocks: the
            scores, softmax and context of every block) with a Reducer given no reductions and keeping no queries
            or keys, so every probability is made and nothing reads it.

Columns: CPU seconds of the pass (user + system, resource.getrusage; on a shared machine the less noisy one),
wall seconds, the peak RSS during the pass (VmHWM, reset after loading) and what the pass added at that
peak over the RSS before it, and each row's CPU seconds over the mean "sdpa" row of the same T.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_long_context import reset_peak, status_kb  # noqa: E402 (this folder is the script's sys.path[0])

ROOT = Path(__file__).resolve().parents[1]
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
LENGTHS = (1024, 3700, 8192)
MODES = ("sdpa", "eager", "before", "after", "probs")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def random_ids(n: int, vocab: int) -> list[int]:
    import torch

    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(0)).tolist()


def hf_pass(n: int, implementation: str):
    """A callable running HF's base model over n random ids (loaded before the clock starts)."""
    import torch

    from attnviz.loading.hf import _from_pretrained, import_transformers, locate
    from attnviz.loading.offline import offline_path

    import_transformers()
    import transformers

    path = offline_path(SMOLLM) or locate(SMOLLM)  # the GGUF the offline package ships, dequantised by HF
    model = _from_pretrained(transformers.AutoModel, path, attn_implementation=implementation,
                             dtype=torch.float32).eval()
    ids = torch.tensor([random_ids(n, model.config.vocab_size)])

    def run():
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False)
    return run


def reduced_pass(n: int):
    """A callable running attnviz's reduced pass (the tree first on sys.path) over n random ids."""
    import attnviz
    from attnviz.models.reduced_pass import reduced_trace
    from attnviz.plots.pooling import tile_cells

    model = attnviz.load(SMOLLM, max_tokens=n)
    ids = random_ids(n, model.config.vocab_size)
    tokens = [model.tokenizer.id_to_token(i) or "" for i in ids]
    fields = dict(tokens=tokens, offsets=[(i, i + 1) for i in range(n)], sequence_ids=[0] * n, input_ids=ids,
                  words=tokens, word_of_token=list(range(n)), truncated=False, special_mask=[False] * n)
    tile = tile_cells(model.info.n_layers, model.info.n_heads)
    return lambda: reduced_trace(model.module, fields, tile=tile)


def probabilities_only(n: int):
    """A callable running this tree's row kernel over n random ids with no reduction (the "probs" row)."""
    import torch

    import attnviz
    from attnviz.transformer.reducer import Reducer

    model = attnviz.load(SMOLLM, max_tokens=n)
    ids = torch.tensor([random_ids(n, model.config.vocab_size)])
    ones, types = torch.ones_like(ids), torch.zeros_like(ids)

    def run():
        with torch.inference_mode():
            model.module(ids, ones, types, with_logits=False, record=Reducer({}, n, keep=False))
    return run


def one(mode: str, n: int, tree: str) -> dict:
    """One row in this process: load, then time one pass."""
    sys.path.insert(0, tree)
    os.environ.setdefault("TQDM_DISABLE", "1")
    import torch

    torch.set_num_threads(1)
    if mode in ("sdpa", "eager"):
        run = hf_pass(n, mode)
    else:
        run = probabilities_only(n) if mode == "probs" else reduced_pass(n)
    from attnviz.workbench.memory import trim_heap

    trim_heap()  # the load's freed heap back to the OS: the RSS is then what is held
    reset_peak()  # VmHWM back to the RSS: the peak read after is the pass's
    before = status_kb("VmRSS")
    cpu, wall = cpu_seconds(), time.perf_counter()
    run()
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    peak = status_kb("VmHWM")
    return {"mode": mode, "tokens": n, "cpu_s": cpu, "wall_s": wall, "peak_rss": peak, "pass_peak": peak - before,
            "tree": tree}


def table(rows: list[dict]) -> str:
    sdpa = {}
    for r in rows:
        if r["mode"] == "sdpa":
            sdpa.setdefault(r["tokens"], []).append(r["cpu_s"])
    lines = [f"{'T':>6} {'mode':>7} {'CPU s':>8} {'wall s':>8} {'VmHWM':>9} {'pass peak':>10} {'x sdpa':>7}"]
    for r in rows:
        base = sdpa.get(r["tokens"])
        ratio = f"{r['cpu_s'] / (sum(base) / len(base)):7.2f}" if base else f"{'':>7}"
        lines.append(f"{r['tokens']:>6} {r['mode']:>7} {r['cpu_s']:8.1f} {r['wall_s']:8.1f} "
                     f"{r['peak_rss'] / 1e6:7.0f}MB {r['pass_peak'] / 1e6:8.0f}MB {ratio}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", default="/work/main", help="the tree whose reduced pass is 'before'")
    parser.add_argument("--skip-eager-above", type=int, default=None, help="no eager row past this T")
    parser.add_argument("--once-above", type=int, default=None, help="one repeat only past this T")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # the child process: mode, T, tree
    args = parser.parse_args()
    if args.one:
        mode, n, tree = args.one
        print(json.dumps(one(mode, int(n), tree)))
        return
    rows = []
    for n in args.lengths:
        for _ in range(1 if args.once_above is not None and n > args.once_above else args.repeats):
            for mode in args.modes:
                if mode == "eager" and args.skip_eager_above is not None and n > args.skip_eager_above:
                    continue
                tree = str(Path(args.before).resolve()) if mode == "before" else str(ROOT)
                done = subprocess.run([sys.executable, __file__, "--one", mode, str(n), tree],
                                      capture_output=True, text=True, check=True)
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(table(rows).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
