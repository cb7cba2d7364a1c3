"""`atlas build` against HeadVis's own pipeline (issue 37, "Speed"): the same texts, the same model (SmolLM2), one
thread each, whole processes side by side, CPU seconds and peak memory (the children's ru_maxrss).

HeadVis's pipeline is neuronpedia's `utils/neuronpedia-utils/neuronpedia_utils/headvis/compute-head-metrics.py`;
it is not part of this project: give its path inside a checkout of that repository (it looks four folders up for the
repository's root). It loads a model by name with transformers and its texts with `datasets.load_dataset`; here it
gets SmolLM2 as a folder saved by
transformers from the offline GGUF (float32, eager attention, as its `--dtype float32 --device cpu`) and a stand-in
`datasets` module that hands it the lines of our text file. Ours runs `python -m attnviz atlas build` on the same file.

    .venv/bin/python benchmarks/bench_atlas_headvis.py --headvis-script /path/to/compute-head-metrics.py \
        --texts 64 --seq-len 128 [--dtype bfloat16] [--device cuda]

At the end it prints, per metric, the largest difference between HeadVis's scatter values and ours (the same
computation: float32 within its 4 decimals; bfloat16 as far as two bfloat16 implementations drift apart).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
MEASURED = r"""
import resource, subprocess, sys, time
start = time.monotonic()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print("MEASURED", usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, time.monotonic() - start,
      done.returncode)
if done.returncode:
    sys.stderr.write(done.stderr[-3000:])
"""
DATASETS_STANDIN = '''"""A stand-in for Hugging Face's `datasets`: load_dataset hands out one local text file's rows."""
import os


def load_dataset(path=None, name=None, split=None, streaming=None, trust_remote_code=None, **_):
    with open(os.environ["ATLAS_BENCH_TEXTS"], encoding="utf-8") as lines:
        return [{"text": line.rstrip("\\n")} for line in lines if line.strip()]
'''
WORDS = ("the keys to the old cabinet are on a small table near my door while the cat who saw a dog runs by the "
         "river and the doctor said that she would come back to the hospital tomorrow").split()


def texts(n: int, seed: int = 0, words: tuple[int, int] = (40, 140)) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) for _ in range(n)]


def hf_folder(out: Path) -> Path:
    """SmolLM2 as a transformers folder (safetensors, float32), made from the offline GGUF as the tests load it."""
    import torch
    import transformers as tf

    import attnviz

    path = Path(attnviz.load(SMOLLM).info.path)
    model = tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tokenizer = tf.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    # transformers will not save a model read from GGUF: the same weights in a model made from its config
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def measure(command: list[str], env: dict, cwd: str | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURED, *command], capture_output=True, text=True, env=env,
                          cwd=cwd)
    line = next(row for row in done.stdout.splitlines() if row.startswith("MEASURED"))
    cpu, peak, wall, code = line.split()[1:]
    if int(code):
        raise SystemExit(f"{command[:3]} failed:\n{done.stderr}")
    return {"cpu_s": float(cpu), "peak_gb": int(peak) / 1e9, "wall_s": float(wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headvis-script", required=True, help="compute-head-metrics.py from neuronpedia")
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--words", type=int, nargs=2, default=(40, 140), metavar=("MIN", "MAX"),
                        help="each text's length in words, drawn between MIN and MAX (600 700 fills --seq-len 512, "
                             "as the Pile's documents fill HeadVis's default)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of both")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both run the model (cuda: the CPU seconds are then what each does besides the "
                             "GPU's work: HeadVis's per-head loops against our reductions)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="both runs' dtype (HeadVis's pipeline's default is bfloat16; ours float32)")
    parser.add_argument("--before", metavar="DIR",
                        help="a checkout of an earlier commit (git worktree add DIR REV): its build runs too, "
                             "interleaved, for a before/after in one run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        corpus = scratch / "texts.txt"
        corpus.write_text("\n".join(texts(args.texts, words=args.words)) + "\n", encoding="utf-8")
        folder = hf_folder(scratch / "smollm2-hf")
        standin = scratch / "standin"
        standin.mkdir()
        (standin / "datasets.py").write_text(DATASETS_STANDIN)
        model_map = scratch / "np_model_to_hf.json"
        model_map.write_text(json.dumps({"smollm2-135m": str(folder)}))
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", ATLAS_BENCH_TEXTS=str(corpus),
                   HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
        if args.device == "cpu":  # ours loads on CUDA when there is one (attnviz.load's default)
            env["CUDA_VISIBLE_DEVICES"] = ""
        theirs = [sys.executable, args.headvis_script, "--model-name", str(folder), "--dataset-name", "local",
                  "--n-sequences", str(args.texts), "--seq-len", str(args.seq_len), "--batch-size", "4",
                  "--device", args.device, "--dtype", args.dtype, "--np-model-map", str(model_map),
                  "--exports-dir", str(scratch / "headvis"), "--hf-cache-dir", str(scratch / "hf-cache")]
        ours = [sys.executable, "-m", "attnviz", "atlas", "build", "--model", SMOLLM, "--texts", str(corpus),
                "--seq-len", str(args.seq_len)]
        dtype = [] if args.dtype == "float32" else ["--dtype", args.dtype]  # an earlier checkout may not have it
        their_env = dict(env, PYTHONPATH=str(standin))
        print(f"SmolLM2, {args.texts} texts of {args.words[0]}-{args.words[1]} words, --seq-len {args.seq_len}, "
              f"{args.dtype} on {args.device}, one thread each")
        print(f"{'round':5} {'run':22} {'CPU s':>8} {'wall s':>8} {'peak GB':>8}")
        for round_ in range(args.rounds):
            # the same work as HeadVis's pipeline: the metrics and the examples, not our detectors (a 1-2 s step
            # it has no counterpart of; an earlier checkout may not have them, nor the flag)
            runs = [("HeadVis's pipeline", theirs, their_env, None),
                    ("attnviz atlas build", ours + dtype + ["--no-detectors", "--out", str(scratch / f"ours{round_}")],
                     env, None)]
            if args.before:  # `python -m attnviz` run in the earlier checkout imports that attnviz
                cli = Path(args.before, "attnviz", "cli", "atlas.py")
                same = ["--no-detectors"] if cli.is_file() and "--no-detectors" in cli.read_text() else []
                runs.append(("  the same, before", ours + dtype + same + ["--out", str(scratch / f"before{round_}")],
                             env, args.before))
            for label, command, run_env, cwd in runs:
                found = measure(command, run_env, cwd)
                print(f"{round_ + 1:5} {label:22} {found['cpu_s']:8.1f} {found['wall_s']:8.1f} "
                      f"{found['peak_gb']:8.2f}", flush=True)
        scatter = next((scratch / "headvis").rglob("scatter_data.json"), None)
        if scatter is not None:
            print(f"(HeadVis's tree: {scatter.relative_to(scratch)})")
            compare(scatter, scratch / "ours0")


def compare(scatter: Path, ours: Path) -> None:
    """The largest difference per metric between HeadVis's scatter values and ours: the same computation."""
    from attnviz.readouts import atlas

    theirs = {(row["layer"], row["head"]): row for row in json.loads(scatter.read_text())}
    mine = atlas.metrics(ours)["metrics"]
    for name, grid in mine.items():
        gaps = [abs(value - theirs[layer, head][name]) for layer, row in enumerate(grid)
                for head, value in enumerate(row) if value is not None and theirs[layer, head].get(name) is not None]
        print(f"  {name:22} max |ours - HeadVis's| {max(gaps):.2e} over {len(gaps)} heads")


if __name__ == "__main__":
    main()
