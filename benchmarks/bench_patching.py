"""Activation patching's full heads grid in CPU seconds on one thread (a benchmark, not a test): SmolLM2-135M
(30 layers x 9 heads = 270 patched runs) and all-MiniLM-L6-v2 (6 x 12 = 72) on a 12-token minimal pair, and,
where TransformerLens is importable, its `get_act_patch_attn_head_out_all_pos` on the same SmolLM2 weights.
`--prefix`: instead, SmolLM2's per-position grids (the residual stream, L x T = 360 patched runs, and heads x
positions, L x H x T = 3240) and its heads grid, computed whole and reusing the receiving run's prefix
(patching.prepare's reuse_prefix), side by side in one run, the two interleaved in each round; max |diff| is
the largest difference between the two grids, normalised (0 the corrupted run, 1 the clean one).

    .venv/bin/python benchmarks/bench_patching.py
    .venv/bin/python benchmarks/bench_patching.py --prefix
    /tmp/tlvenv/bin/python benchmarks/bench_patching.py     # a venv that also has transformer_lens

Metric: SmolLM2, the logit difference " are" - " is" after the last token; MiniLM (a sentence-embedding
model with no masked-LM head), the cosine of the mean-pooled embedding with the clean run's. Both normalised
so that 0 is the corrupted run and 1 the clean run (docs/views/patching.md, "Activation patching"). CPU
seconds are `time.process_time()` with `torch.set_num_threads(1)`, the median of --repeats runs after one
warm-up; loading is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz.interventions import attribution_patching, patching  # noqa: E402

SMOLLM, MINILM = "HuggingFaceTB/SmolLM2-135M-Instruct", "sentence-transformers/all-MiniLM-L6-v2"
DECODER_PAIR = ("The keys to the cabinet in the hall of the old house",
                "The key to the cabinet in the hall of the old house",
                " are", " is")
ENCODER_PAIR = ("The keys to the cabinet are on the table.", "The key to the cabinet is on the table.", None, None)
TARGETS = {"smollm2": 20.0, "minilm": 3.0}


def cpu_seconds(run, repeats: int) -> tuple[float, object]:
    result = run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.process_time()
        result = run()
        times.append(time.process_time() - start)
    return statistics.median(times), result


def ours(model, texts, repeats):
    pair = patching.patch_pair(model, *texts)
    runs = patching.prepare(model.module, pair)
    seconds, grid = cpu_seconds(lambda: patching.heads(runs), repeats)
    return pair, seconds, grid


def prefix_rows(repeats: int) -> None:
    """The per-position grids computed whole and reusing the prefix: the median CPU seconds of `repeats` rounds
    after a warm-up, each round running both (interleaved, so a change in the machine's load falls on both)."""
    smollm = attnviz.load(SMOLLM)
    pair = patching.patch_pair(smollm, *DECODER_PAIR)
    whole = patching.prepare(smollm.module, pair, reuse_prefix=False)
    reused = patching.prepare(smollm.module, pair)
    grids = {"residual": patching.residual,
             "heads x positions": lambda runs: attribution_patching.exact_grid(runs, "head_positions"),
             "heads (all pos.)": patching.heads}  # from position 0: only the rows' joining by layer differs
    print(f"SmolLM2, {len(pair.corrupt_ids)} tokens, one thread, CPU seconds (median of {repeats} after a warm-up)")
    print(f"{'grid':18s} {'patches':>7s} {'whole':>7s} {'prefix':>7s} {'speed-up':>8s} {'max |diff|':>10s}")
    for name, grid in grids.items():
        times: dict[str, list[float]] = {"whole": [], "prefix": []}
        results = {"whole": grid(whole), "prefix": grid(reused)}  # the warm-up
        for _ in range(repeats):
            for label, runs in (("whole", whole), ("prefix", reused)):
                start = time.process_time()
                results[label] = grid(runs)
                times[label].append(time.process_time() - start)
        before, after = statistics.median(times["whole"]), statistics.median(times["prefix"])
        patches = int(np.isfinite(results["whole"]).sum())
        diff = np.nanmax(np.abs(results["whole"] - results["prefix"]))
        print(f"{name:18s} {patches:7d} {before:7.2f} {after:7.2f} {before / after:7.2f}x {diff:10.1e}")


def transformer_lens_grid(model, pair, repeats):
    """TransformerLens 4's bridge over HF's LlamaForCausalLM on the GGUF weights our loader reads."""
    import transformers as tf
    from transformer_lens import patching as tl_patching
    from transformer_lens.model_bridge import TransformerBridge

    path = Path(model.info.path)
    hf = tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    config = Path("/tmp/bench_patching_config")  # the bridge reads a config by name: the GGUF's, written once
    if not (config / "config.json").exists():
        config.mkdir(exist_ok=True)
        settings = hf.config.to_dict()
        settings.pop("quantization_config", None)
        import json
        (config / "config.json").write_text(json.dumps(settings))
    tokenizer = tf.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    bridge = TransformerBridge.boot_transformers(str(config), hf_model=hf, tokenizer=tokenizer)
    bridge.enable_compatibility_mode()
    clean, corrupt = torch.tensor([pair.clean_ids]), torch.tensor([pair.corrupt_ids])
    _, cache = bridge.run_with_cache(clean)

    def diff(logits):
        return logits[0, -1, pair.target_id] - logits[0, -1, pair.contrast_id]
    with torch.no_grad():
        clean_value, corrupt_value = float(diff(bridge(clean))), float(diff(bridge(corrupt)))

    def metric(logits):
        return (diff(logits) - corrupt_value) / (clean_value - corrupt_value)
    seconds, grid = cpu_seconds(
        lambda: tl_patching.get_act_patch_attn_head_out_all_pos(bridge, corrupt, cache, metric), repeats)
    return seconds, grid.detach().double().numpy()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-transformer-lens", action="store_true")
    parser.add_argument("--prefix", action="store_true",
                        help="SmolLM2's residual and heads x positions grids, computed whole and reusing the prefix")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.prefix:
        prefix_rows(args.repeats)
        return 0
    rows = []
    smollm = attnviz.load(SMOLLM)
    pair, seconds, grid = ours(smollm, DECODER_PAIR, args.repeats)
    rows.append(("smollm2", len(pair.clean_ids), grid.size, seconds))
    minilm = attnviz.load(MINILM)
    encoder_pair, encoder_seconds, encoder_grid = ours(minilm, ENCODER_PAIR, args.repeats)
    rows.append(("minilm", len(encoder_pair.clean_ids), encoder_grid.size, encoder_seconds))
    print(f"{'model':10s} {'tokens':>6s} {'patches':>7s} {'CPU-s':>7s} {'target':>7s}")
    for name, tokens, patches, cpu in rows:
        print(f"{name:10s} {tokens:6d} {patches:7d} {cpu:7.2f} {TARGETS[name]:7.1f}")
    if not args.no_transformer_lens:
        try:
            import transformer_lens  # noqa: F401
        except ImportError:
            print("TransformerLens: not importable in this Python (see the docstring)")
            return 0
        tl_seconds, tl_grid = transformer_lens_grid(smollm, pair, args.repeats)
        print(f"TransformerLens get_act_patch_attn_head_out_all_pos, smollm2: {tl_seconds:.2f} CPU-s "
              f"({tl_seconds / seconds:.1f}x ours); max |ours - TL| = {np.abs(tl_grid - grid).max():.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
