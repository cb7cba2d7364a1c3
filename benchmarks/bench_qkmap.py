"""The corpus map (attnviz.readouts.qkmap) and the sink anatomy on one model, in this process: CPU seconds
(user + system), wall seconds and the peak resident memory (VmHWM) after the model's load and after each.

    .venv/bin/python benchmarks/bench_qkmap.py [--model ID] [--sentences 200] [--layer 18] [--head 8] [--sinks]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's attnviz, from any folder

import attnviz  # noqa: E402
from attnviz.interventions import qkmap, sinks  # noqa: E402


def vm_hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def measured(work):
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return result, {"cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
                    "vm_hwm_mb": round(vm_hwm_kb() / 1024, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--layer", type=int, default=18)
    parser.add_argument("--head", type=int, default=8)
    parser.add_argument("--sinks", action="store_true", help="also the sink anatomy on the built-in texts")
    args = parser.parse_args()
    model, load = measured(lambda: attnviz.load(args.model))
    report = {"model": args.model, "load": load}
    corpus = qkmap.builtin_corpus("en")[: args.sentences]
    found, report["qkmap"] = measured(lambda: qkmap.qk_map(model, corpus, args.layer, args.head))
    report["qkmap"] |= {"sentences": len(found.sentences), "tokens": found.n_points,
                        "reserved_mb": round(qkmap.map_bytes(model, found.n_points) / 2**20, 1)}
    if args.sinks:
        anatomy, report["sinks"] = measured(
            lambda: sinks.sink_anatomy(model, sinks.builtin_texts(), max_tokens=sinks.TEXT_TOKENS))
        report["sinks"] |= {"texts": anatomy.n_texts, "ratio_at_0.3": anatomy.ratio(0.3)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
