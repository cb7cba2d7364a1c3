"""SmolLM2 loaded whole and split by a device map, side by side (a benchmark, not a test): load time,
peak resident memory of the load, resident memory once loaded, and one forward pass.

    .venv/bin/python benchmarks/bench_device_map.py                         # cpu 300MB + disk, against whole
    .venv/bin/python benchmarks/bench_device_map.py --cpu 150MB --repeats 3 --json out.json

Each load runs in a fresh process (peak RSS, ru_maxrss, only grows): the process imports attnviz and
transformers first, and "load peak" is the peak of the whole process minus its RSS before the load. The
offload folder is a temporary directory; the forward pass is `model.run` on a 64-token text (offloaded
blocks read back from disk on every pass). "held after load" is measured after malloc_trim, as the app
trims after loads.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one(kind: str, cpu: str) -> dict:
    """One load in this process: whole, or split with max_memory {"cpu": cpu, "disk": ...}."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    import attnviz
    from attnviz.loading import hf
    from attnviz.reference.bench import text_of_length
    from attnviz.workbench.memory import trim_heap

    hf.import_transformers()
    before = rss()
    with tempfile.TemporaryDirectory() as folder:
        options = {} if kind == "whole" else {"device_map": "auto", "max_memory": {"cpu": cpu, "disk": "4GB"},
                                              "offload_folder": folder}
        start = time.perf_counter()
        model = attnviz.load(SMOLLM, **options)
        load_s = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
        trim_heap()  # freed heap back to the OS (as the app does after loads): RSS is then what is held
        after = rss()
        text = text_of_length(model, 64)
        model.run(text)  # warm
        start = time.perf_counter()
        model.run(text)
        run_s = time.perf_counter() - start
        device_map = getattr(model.module, "hf_device_map", {"": "cpu"})
        places = {device: sum(1 for d in device_map.values() if d == device) for device in set(device_map.values())}
    return {"kind": kind, "load_s": load_s, "rss_before": before, "load_peak": peak - before,
            "held_after": after - before, "run_s": run_s, "map_entries": places}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="300MB", help="max_memory['cpu'] of the split load")
    parser.add_argument("--repeats", type=int, default=1, help="fresh processes per kind (medians)")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--one", choices=["whole", "split"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.cpu)))
        return 0
    rows = {}
    for kind in ("whole", "split"):
        runs = []
        for _ in range(args.repeats):  # a child per load: peak RSS never goes down within a process
            out = subprocess.run([sys.executable, __file__, "--one", kind, "--cpu", args.cpu], capture_output=True,
                                 text=True, check=True, cwd=ROOT)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        rows[kind] = {key: statistics.median(r[key] for r in runs) if isinstance(runs[0][key], (int, float))
                      else runs[0][key] for key in runs[0]}
    mb = 1e6
    print(f"SmolLM2-135M (GGUF, float32 in memory), split: device_map='auto', max_memory cpu {args.cpu} + disk; "
          f"median of {args.repeats} fresh process(es)")
    print(f"{'':28s} {'whole':>12s} {'split':>12s}")
    w, s = rows["whole"], rows["split"]
    print(f"{'load time (s)':28s} {w['load_s']:12.1f} {s['load_s']:12.1f}")
    print(f"{'load peak RSS (MB)':28s} {w['load_peak'] / mb:12.0f} {s['load_peak'] / mb:12.0f}")
    print(f"{'RSS held after load (MB)':28s} {w['held_after'] / mb:12.0f} {s['held_after'] / mb:12.0f}")
    print(f"{'run, 64 tokens (ms)':28s} {1000 * w['run_s']:12.0f} {1000 * s['run_s']:12.0f}")
    print(f"{'process RSS before load (MB)':28s} {w['rss_before'] / mb:12.0f} {s['rss_before'] / mb:12.0f}")
    print(f"split map entries per device: {s['map_entries']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": args.cpu, "repeats": args.repeats, **rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
