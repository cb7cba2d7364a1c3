"""Opening the offline models: transformers' GGUF load (the route before the model cache) against ours,
first and cached, each in a fresh process.

    .venv/bin/python benchmarks/bench_load.py [--models ID,ID] [--modes hf,first,cached] [--repeats 1]

Modes:
  hf      transformers' load_gguf_checkpoint on the whole file, then our module filled by copying (what
          `attnviz.load` did before the cache); safetensors folders: read, then copied
  first   `attnviz.load` with an empty cache folder: streamed dequantisation, the tokenizer converted, the
          cache written
  cached  `attnviz.load` again on that cache folder

Per run: wall seconds, CPU seconds (user + system), the process's peak resident memory (VmHWM) and that
peak above the resident memory once torch and transformers are imported (what a load reserves in the app,
`workbench/shelf.source_load_bytes`), all counted from after those imports (the app makes them at its
start); and the whole process's wall seconds, imports included. The cache folder is a temporary one, never
~/.cache/attnviz.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["sentence-transformers/all-MiniLM-L6-v2", "HuggingFaceTB/SmolLM2-135M-Instruct", "google/gemma-3-270m"]

CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

model_id, mode = sys.argv[1], sys.argv[2]
import torch
from attnviz.loading import build_module, hf
from attnviz.loading.offline import offline_path
hf.import_transformers()  # the app imports these at its start: not part of what a load costs
baseline = status("VmRSS")
cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
wall0 = time.perf_counter()
stages = []
if mode == "hf":
    path = offline_path(model_id)
    if path.suffix == ".gguf":
        checkpoint = hf.read_gguf_with_transformers(path)
    else:
        checkpoint = hf.read_checkpoint(path)
    module = build_module(checkpoint.config, checkpoint.tensors).eval()
else:
    import attnviz
    model = attnviz.load(model_id, progress=lambda s: stages.append((round(time.perf_counter() - wall0, 1), s)))
    module = model.module
wall = time.perf_counter() - wall0
cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_mb": status("VmHWM") / 2**20,
                  "above_imports_mb": (status("VmHWM") - baseline) / 2**20,
                  "process_wall_s": time.perf_counter() - started,
                  "parameters_mb": sum(p.numel() * p.element_size() for p in module.parameters()) / 2**20,
                  "stages": stages}))
"""


def run(model_id: str, mode: str, cache_dir: str) -> dict:
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, model_id, mode], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default="hf,first,cached")
    parser.add_argument("--repeats", type=int, default=1, help="cached runs per model")
    parser.add_argument("--stages", action="store_true", help="print each run's loading stages")
    args = parser.parse_args()
    print(f"{'model':40} {'mode':7} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'above imports MB':>17} "
          f"{'process wall s':>15}")
    for model_id in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="attnviz-bench-cache-") as cache_dir:
            for mode in args.modes.split(","):
                for _ in range(args.repeats if mode == "cached" else 1):
                    result = run(model_id, mode, cache_dir)
                    if "error" in result:
                        print(f"{model_id:40} {mode:7} error: {result['error']}")
                        continue
                    print(f"{model_id:40} {mode:7} {result['wall_s']:7.1f} {result['cpu_s']:7.1f} "
                          f"{result['peak_mb']:8.0f} {result['above_imports_mb']:17.0f} "
                          f"{result['process_wall_s']:15.1f}", flush=True)
                    if args.stages:
                        for at, stage in result["stages"]:
                            print(f"{'':48}{at:7.1f}  {stage}")


if __name__ == "__main__":
    main()
