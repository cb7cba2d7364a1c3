"""Long contexts in bounded memory: the growth table of `run_reduced` on SmolLM2 (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_long_context.py                       # T = 512 .. 8192, one thread
    .venv/bin/python benchmarks/bench_long_context.py --lengths 512 1024 --threads 2 --json out.json

Each length runs in a fresh process (VmHWM, the peak resident set, only grows): the process loads SmolLM2
(offline) with max_tokens = T, then runs one reduced forward pass (attnviz.models.reduced_pass.reduced_trace, the
mosaic tiles at SmolLM2's 34 cells a side, the head profile, float16 queries and keys) on T random token ids.
Columns: wall seconds and CPU seconds (time.process_time: all threads; on a loaded machine the less noisy one)
of the pass; the peak RSS of the whole process during the pass (VmHWM, reset after loading, whose own peak
is higher) and that peak less the RSS after loading (what the pass added at its peak); the bytes
the reduced trace holds; the full float32 maps `run` would need, for comparison; and the CPU seconds of a
head pick (that head's profile, and its map recomputed for a 96-token window of rows and columns). The
growth columns are each value's ratio to the previous length's (x2 tokens: x2 = linear, x4 = quadratic).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
LENGTHS = (512, 1024, 2048, 4096, 8192)


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> None:
    """VmHWM back to the current RSS (Linux >= 4.0), so the peak read after the pass is the pass's, not the
    load's (loading the checkpoint peaks higher than a short pass)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def one(n: int, threads: int, chunk_rows: int) -> dict:
    """One reduced pass of n random ids in this process."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    import torch

    torch.set_num_threads(threads)
    import attnviz
    from attnviz.analysis import profile_reduced
    from attnviz.models.reduced_pass import reduced_trace
    from attnviz.plots.pooling import tile_cells
    from attnviz.workbench.memory import trim_heap

    model = attnviz.load(SMOLLM, max_tokens=n)
    ids = torch.randint(0, model.config.vocab_size, (n,), generator=torch.Generator().manual_seed(0)).tolist()
    tokens = [model.tokenizer.id_to_token(i) or "" for i in ids]
    fields = dict(tokens=tokens, offsets=[(i, i + 1) for i in range(n)], sequence_ids=[0] * n, input_ids=ids,
                  words=tokens, word_of_token=list(range(n)), truncated=False, special_mask=[False] * n)
    tile = tile_cells(model.info.n_layers, model.info.n_heads)
    load_peak = status_kb("VmHWM")
    trim_heap()  # the load's freed heap back to the OS, as the app does after loads: RSS is then what is held
    reset_peak()
    loaded = status_kb("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    trace = reduced_trace(model.module, fields, tile=tile, chunk_rows=chunk_rows)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = status_kb("VmHWM")
    pick = time.process_time()  # what a head pick costs the server: the profile, and a 96-token window recomputed
    profile_reduced(trace).head(12, 4)
    trace.head_window(12, 4, slice(n - 96, n), slice(n - 96, n))
    pick = time.process_time() - pick
    return {"pick_cpu_s": pick, "tokens": n, "wall_s": wall, "cpu_s": cpu, "peak_rss": peak, "pass_peak": peak - loaded,
            "loaded_rss": loaded, "load_peak": load_peak, "held": trace.nbytes, "full_maps": model.full_maps_bytes(n),
            "tile": tile, "threads": threads}


def _growth(row: dict, previous: dict | None, key: str) -> str:
    return f"{row[key] / previous[key]:5.2f}" if previous else f"{'':>5}"


def table(rows: list[dict]) -> str:
    head = (f"{'T':>6} {'wall s':>8} {'CPU s':>8} {'x':>5} {'peak RSS':>9} {'pass peak':>9} {'x':>5} "
            f"{'held/text':>9} {'x':>5} {'full maps':>10} {'pick CPU s':>10}")
    lines = [head]
    previous = None
    for r in rows:
        lines.append(f"{r['tokens']:>6} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} {_growth(r, previous, 'cpu_s')} "
                     f"{r['peak_rss'] / 1e6:7.0f}MB {r['pass_peak'] / 1e6:7.0f}MB {_growth(r, previous, 'pass_peak')} "
                     f"{r['held'] / 1e6:7.0f}MB {_growth(r, previous, 'held')} {r['full_maps'] / 1e9:8.1f}GB "
                     f"{r.get('pick_cpu_s', float('nan')):10.3f}")
        previous = r
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chunk-rows", type=int, default=256)
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one length
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.threads, args.chunk_rows)))
        return
    rows = []
    for n in args.lengths:
        done = subprocess.run([sys.executable, __file__, "--one", str(n), "--threads", str(args.threads),
                               "--chunk-rows", str(args.chunk_rows)], capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(table(rows).splitlines()[-1] if len(rows) > 1 else table(rows), flush=True)
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
