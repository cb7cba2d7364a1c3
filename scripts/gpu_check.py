"""The GPU path, checked: parity with HF eager, bfloat16 drift, speed and device choice; models split by a device map.

    python scripts/gpu_check.py [--out DIR]                # a CUDA machine: one command, under ~4 minutes
    python scripts/gpu_check.py --device cpu --quick       # dry run anywhere (add --tiny-only: seconds)

1. float32 parity (TF32 off): max |Δ attention| <= 1e-5, |Δ hidden| <= 1e-4 against HF eager on the same
   device, on tiny random models of every family and on the two offline pretrained models, padded batch included;
2. bfloat16: ours vs HF eager, both bf16, and each vs the float32 reference (measured, no bound: NaN fails);
3. model.run vs HF eager (tokenize + forward + attentions to numpy), synchronized, median of pairs;
4. `device=None` picks cuda when CUDA is there;
5. models split by accelerate (device_map) equal the same model on one device (max |Δ| <= 1e-6): on CPU + disk
   (--device cpu), on the GPU + CPU + disk, and, where there are two GPUs or more, across two GPUs (a
   message says it is skipped otherwise), each layer's attention recorded where it runs and gathered on one device.
6. interventions and the atlas on the device against the same work on the CPU (max |Δ| <= 1e-4 of the normalised
   grids, 1e-5 of the atlas's metrics), each timed on both: exact patching (heads grid, residual stream),
   attribution patching (every grid), the exact check of the estimate's top 10 heads, a circuit of heads (edge
   scores, faithfulness against random circuits) and an atlas build over 16 texts with examples; SmolLM2 on the
   built-in agreement pair, a tiny random Llama with --tiny-only.
Prints tables and a final PASS/FAIL line; exit 0 pass, 1 fail, 2 when --device cuda has no CUDA.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # before tqdm is imported (it reads TQDM_* then); imported by a test: leave the env alone
    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF de-quantizing bar would flood the table
sys.path.insert(0, str(ROOT))  # run as a file: import attnviz and the tiny-model builders of the parity tests

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import attnviz  # noqa: E402
from attnviz.interventions import attribution_patching, circuit, patching  # noqa: E402
from attnviz.loading import build_module, hf, pick_device, split  # noqa: E402
from attnviz.loading.offline import install_hint, offline_path  # noqa: E402
from attnviz.models.loaded_model import LoadedModel  # noqa: E402
from attnviz.readouts import atlas  # noqa: E402
from attnviz.readouts.atlas_metrics import METRICS  # noqa: E402
from attnviz.reference.bench import text_of_length  # noqa: E402
from tests.helpers.tiny_hf import DECODERS, ENCODERS, VOCAB, batch, hf_model, tiny_decoder  # noqa: E402
from tests.helpers.tiny_tokenizers import bpe_tokenizer  # noqa: E402

ATTENTION_TOL, HIDDEN_TOL = 1e-5, 1e-4
SPLIT_TOL = 1e-6  # a split moves weights, not numbers: the same kernels on the same kind of device
GRID_TOL, ATLAS_TOL = 1e-4, 1e-5  # a grid is a share of the pair's logit difference; the atlas's means pool many maps
AGREEMENT_PAIR = ("The keys to the cabinet", "The key to the cabinet", " are", " is")
PRETRAINED = ["sentence-transformers/all-MiniLM-L6-v2", "HuggingFaceTB/SmolLM2-135M-Instruct"]
TEXTS = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired 😀🐶!",
    "小明告诉老师他生病了。",
    'Click <a href="javascript:alert(1)">here</a> or <script>x()</script> & <b>bold</b>.',
]


def strict_float32() -> None:
    """TF32 rounds matmul inputs to 10 mantissa bits (~1e-3): float32 parity at 1e-5 needs it off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def hf_bfloat16(reference):
    """HF in bf16 as `from_pretrained(dtype=bfloat16)` gives it: `.to(bf16)` would also round the rotary
    inv_freq buffers, which from_pretrained keeps float32 (angles off by ~0.5 rad at position 500)."""
    half = copy.deepcopy(reference).to(torch.bfloat16)
    for name, buffer in reference.named_buffers():
        if name.rsplit(".", 1)[-1] in ("inv_freq", "original_inv_freq"):
            owner, attr = name.rsplit(".", 1) if "." in name else ("", name)
            setattr(half.get_submodule(owner), attr, buffer.clone())
    return half


@torch.inference_mode()
def forward_both(ours, reference, ids, mask, types, device):
    """(ours, HF) outputs as CPU float32 (attentions [L, B, H, T, T], hidden [B, T, C]): both models sit
    on `device`, the comparison happens on CPU copies so the bounds mean the same on every machine."""
    ids, mask = ids.to(device), mask.to(device)
    types = None if types is None or ours.config.causal else types.to(device)  # GPT-2 would embed zeros
    out = ours(ids, mask, types, with_logits=False)
    if out.attentions.device.type != torch.device(device).type:
        raise RuntimeError(f"our attentions came back on {out.attentions.device}, not {device}")
    ref_attn, ref_hidden = hf.reference_outputs(reference, ids, mask, types)
    return (out.attentions.float().cpu(), out.hidden.float().cpu()), (ref_attn.float().cpu(), ref_hidden.float().cpu())


def max_diffs(a, b, mask) -> tuple[float, float]:
    """Max |Δ| of attentions and hidden states over real query rows (padded rows mean nothing)."""
    keep = mask.bool()
    attn = (a[0] - b[0]).abs().transpose(2, 3)[:, keep]  # L, B, T, H, S -> L, N, H, S
    return float(attn.max()), float((a[1] - b[1]).abs()[keep].max())


def tiny_cases():
    """(name, our module, HF base model, inputs) for every family of tests/parity/test_parity_tiny.py."""
    for name, factory in {**ENCODERS, **DECODERS}.items():
        model = hf_model(factory)
        ours = build_module(model.config.to_dict(), model.state_dict()).eval()
        pad = model.config.pad_token_id if name in ENCODERS else 0
        ids, mask, types = batch(pad, pair=name == "bert")
        long_ids = torch.randint(3, VOCAB, (1, 48), generator=torch.Generator().manual_seed(3))
        inputs = [("padded batch 2x12", ids, mask, types),
                  ("single 48 tokens", long_ids, torch.ones_like(long_ids), torch.zeros_like(long_ids))]
        yield f"tiny/{name}", ours, model.base_model, inputs


def padded(model, encodings):
    """Right-padded ids, mask and type ids, as LoadedModel.forward_encodings builds them (on CPU)."""
    width = max(len(e.ids) for e in encodings)
    ids = torch.full((len(encodings), width), model.pad_id, dtype=torch.long)
    mask, types = torch.zeros_like(ids), torch.zeros_like(ids)
    for b, e in enumerate(encodings):
        ids[b, : len(e.ids)], mask[b, : len(e.ids)] = torch.tensor(e.ids), 1
        types[b, : len(e.ids)] = torch.tensor(e.type_ids)
    return ids, mask, types


def pretrained_inputs(model, texts):
    inputs = [(repr(t[:24]), *padded(model, [model.encode(t)])) for t in texts]
    if not model.config.causal:
        inputs.append(("pair " + repr(texts[0][:18]), *padded(model, [model.encode(texts[0], "They are mine.")])))
    inputs.append((f"padded batch of {len(texts)}", *padded(model, [model.encode(t) for t in texts])))
    return inputs


def parity(name, ours, reference, inputs, device, results, bf16_last_only=False):
    """Section 1 rows (one per input) and the section 2 row (worst over inputs) of one model.
    bf16_last_only: bfloat16 on the last input (the padded batch) only: CPUs without bf16 units are slow."""
    ours16, ref16 = copy.deepcopy(ours).to(torch.bfloat16), hf_bfloat16(reference)
    worst = {"model": name, "ours16_hf16": [0.0, 0.0], "ours16_fp32": [0.0, 0.0], "hf16_fp32": [0.0, 0.0]}
    for i, (label, ids, mask, types) in enumerate(inputs):
        ours32, ref32 = forward_both(ours, reference, ids, mask, types, device)
        attn, hidden = max_diffs(ours32, ref32, mask)
        ok = attn <= ATTENTION_TOL and hidden <= HIDDEN_TOL
        results["parity"].append({"model": name, "input": label, "tokens": int(mask.sum(1).max()),
                                  "attention": attn, "hidden": hidden, "ok": ok})
        print(f"{name:38s} {label:28s} {int(mask.sum(1).max()):6d} {attn:11.2e} {hidden:11.2e}  {_flag(ok)}")
        if bf16_last_only and i < len(inputs) - 1:
            continue
        o16, r16 = forward_both(ours16, ref16, ids, mask, types, device)
        for key, (a, b) in {"ours16_hf16": (o16, r16), "ours16_fp32": (o16, ref32), "hf16_fp32": (r16, ref32)}.items():
            worst[key] = [max(w, d) for w, d in zip(worst[key], max_diffs(a, b, mask))]
    worst["ok"] = all(d == d for key in ("ours16_hf16", "ours16_fp32") for d in worst[key])  # NaN fails
    results["bfloat16"].append(worst)


def bench(model, reference, device, lengths, repeats, warmup):
    """attnviz.reference.bench.bench on a device: HF's reference moved there too, inputs moved, attentions copied
    back to numpy on both sides, and cuda synchronized around each timer (kernels run asynchronously)."""
    tokenizer = hf.reference_tokenizer(model.info.path)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def ours(text):
        return model.run(text).attentions

    @torch.inference_mode()
    def theirs(text):
        enc = tokenizer(text, return_tensors="pt").to(device)
        return torch.stack(reference(**enc, output_attentions=True).attentions)[:, 0].float().cpu().numpy()

    def timed(fn, text):
        sync()
        start = time.perf_counter()
        fn(text)
        sync()
        return time.perf_counter() - start

    rows = []
    for n in lengths:
        text = text_of_length(model, n)
        for _ in range(warmup):
            ours(text), theirs(text)
        pairs = [(timed(ours, text), timed(theirs, text)) for _ in range(repeats)]
        rows.append({"model": model.info.name, "tokens": len(model.encode(text).ids),
                     "ours_ms": 1000 * statistics.median(p[0] for p in pairs),
                     "hf_ms": 1000 * statistics.median(p[1] for p in pairs),
                     "ratio": statistics.median(p[0] / p[1] for p in pairs)})
    return rows


def split_maps(device):
    """(label, device_map, max_memory for SmolLM2) of section 5 on this machine, and a note on what is skipped.
    The tiny model takes the dict maps (every placement, deterministically); SmolLM2 takes accelerate's own."""
    if device == "cpu":
        tiny = {"token_embedding": "cpu", "blocks.0": "cpu", "blocks.1": "disk", "final_norm": "disk",
                "lm_head": "disk"}
        return [("cpu+disk", tiny, "auto", {"cpu": "300MB", "disk": "4GB"})], None
    maps = [("cuda:0+cpu+disk", {"token_embedding": 0, "blocks.0": "cpu", "blocks.1": "disk", "final_norm": 0,
                                 "lm_head": 0}, "auto", {0: "300MB", "cpu": "200MB", "disk": "4GB"})]
    if torch.cuda.device_count() < 2:
        return maps, f"multi-GPU split skipped: {torch.cuda.device_count()} GPU here, it needs two or more"
    maps.append(("cuda:0+cuda:1", {"token_embedding": 0, "blocks.0": 0, "blocks.1": 1, "final_norm": 1, "lm_head": 1},
                 "balanced", None))
    return maps, None


@torch.inference_mode()
def split_row(name, label, split_module, whole, ids, mask, device):
    """One section-5 row: the split module against the whole one on `device`, on a padded batch."""
    main = split.main_device(split_module.hf_device_map)
    main = torch.device("cuda", main) if isinstance(main, int) else torch.device(main)
    out = split_module(ids.to(main), mask.to(main), with_logits=False)
    ref = whole(ids.to(device), mask.to(device), with_logits=False)
    attn, hidden = max_diffs((out.attentions.float().cpu(), out.hidden.float().cpu()),
                             (ref.attentions.float().cpu(), ref.hidden.float().cpu()), mask)
    devices = sorted({str(d) for d in split_module.hf_device_map.values()})
    one_device = out.attentions.device == main
    ok = attn <= SPLIT_TOL and hidden <= SPLIT_TOL and one_device
    print(f"{name:38s} {label:16s} {','.join(devices):24s} {attn:11.2e} {hidden:11.2e}  {_flag(ok)}")
    return {"model": name, "split": label, "devices": devices, "attention": attn, "hidden": hidden,
            "gathered_on": str(out.attentions.device), "ok": ok}


def split_check(device, loaded, results):
    maps, skipped = split_maps(device)
    factory = DECODERS["llama-gqa"]
    reference = hf_model(factory)
    config, weights = reference.config.to_dict(), reference.state_dict()
    whole = build_module(config, dict(weights)).to(device).eval()
    ids, mask, _ = batch(0)
    for label, tiny_map, auto, max_memory in maps:
        with tempfile.TemporaryDirectory() as folder:
            plan = split.plan(config, tiny_map, None, folder, torch.float32)
            module = split.materialize(plan, config, dict(weights))
            results["split"].append(split_row("tiny/llama-gqa", label, module, whole, ids, mask, device))
            del module
            for model, _ in loaded:
                if not model.config.causal:
                    continue
                split_model = attnviz.load(model.info.name, device_map=auto, max_memory=max_memory,
                                           offload_folder=folder)
                ids2, mask2, _ = padded(model, [model.encode(t) for t in TEXTS])
                results["split"].append(split_row(model.info.name, label, split_model.module, model.module,
                                                  ids2, mask2, device))
                del split_model
    if skipped:
        print(f"({skipped})")
    results["split_skipped"] = skipped


def on_device(model: LoadedModel, device: str) -> LoadedModel:
    """A copy of `model` with its module on `device`; the original stays where it is, as the reference."""
    info = dataclasses.replace(model.info, device=torch.device(device).type)
    copied = LoadedModel(copy.deepcopy(model.module).to(device), model.tokenizer, info, {}, model.context_tokens)
    copied.pad_id = model.pad_id
    return copied


def _timed(device: str, work):
    """(work(), wall seconds), synchronized where the device runs asynchronously."""
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = work()
    if device == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def intervention_work(model: LoadedModel, pair, device: str, texts: list[str], cells=None, masks=None) -> dict:
    """{what: (float64 array, seconds)} on `model`'s device: the exact heads and residual grids, every grid of
    attribution patching, the exact patching of `cells` (default: the estimate's top 10 heads), the circuit's edge
    scores and the faithfulness of `masks` (default: the circuit of 50 edges and two random circuits of its size,
    patched exactly) and an atlas's six metrics over `texts` (seq_len 128, examples sampled)."""
    out: dict = {}
    runs = patching.prepare(model.module, pair)
    out["patching heads"] = _timed(device, lambda: patching.heads(runs))
    out["patching residual"] = _timed(device, lambda: patching.residual(runs))
    estimate, seconds = _timed(device, lambda: attribution_patching.estimate(runs))
    for grid in attribution_patching.GRIDS:
        out[f"attribution {grid}"] = (estimate.grid(grid), seconds)
    cells = attribution_patching.top_cells(estimate.heads, 10) if cells is None else cells
    out["exact check, top 10"] = _timed(device, lambda: attribution_patching.exact_cells(runs, "heads", cells))
    circuit_runs = circuit.prepare(model.module, pair)
    scores, seconds = _timed(device, lambda: circuit.edge_scores(circuit_runs))
    out["circuit edge scores"] = (scores.scores, seconds)
    if masks is None:  # the CPU's circuit and random circuits, patched on both (near ties may pick other edges)
        chosen = circuit.circuit(scores, 50)
        masks = [chosen.mask(), *circuit.random_circuits(circuit_runs.graph, max(1, len(chosen.edges)), 2)]
    out["circuit faithfulness"] = _timed(device, lambda: circuit.faithfulness(circuit_runs, masks))
    with tempfile.TemporaryDirectory() as folder:
        built, seconds = _timed(device, lambda: atlas.build(model, texts, folder, seq_len=128, examples=True))
    out["atlas metrics"] = (np.array([built["metrics"][name] for name in METRICS], dtype=float), seconds)
    out["cells"], out["masks"] = cells, masks
    return out


def interventions_check(name: str, model: LoadedModel, pair, device: str, texts: list[str], results) -> None:
    """Section 6 rows of one model: each piece of work on `device` against the same on the CPU."""
    cpu_model = on_device(model, "cpu") if model.info.device != "cpu" else model
    device_model = on_device(model, device) if model.info.device != device else model
    on_cpu = intervention_work(cpu_model, pair, "cpu", texts)
    on_dev = intervention_work(device_model, pair, device, texts, cells=on_cpu.pop("cells"),
                               masks=on_cpu.pop("masks"))
    on_dev.pop("cells"), on_dev.pop("masks")
    for what, (want, cpu_s) in on_cpu.items():
        got, dev_s = on_dev[what]
        same_nan = bool((np.isnan(want) == np.isnan(got)).all())
        finite = ~np.isnan(want)
        diff = float(np.abs(got[finite] - want[finite]).max()) if finite.any() else 0.0
        bound = ATLAS_TOL if what == "atlas metrics" else GRID_TOL
        ok = same_nan and diff <= bound
        results["interventions"].append({"model": name, "what": what, "max_abs_diff": diff, "cpu_s": cpu_s,
                                         "device_s": dev_s, "ok": ok})
        print(f"{name:38s} {what:28s} {diff:11.1e} {cpu_s:8.2f} {dev_s:9.2f}  "
              f"{_flag(ok)}{'' if same_nan else ' (NaN cells differ)'}")


def _flag(ok) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[ok]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--quick", action="store_true", help="dry run: 2 texts, bf16 on the batch only, lengths 16/64")
    parser.add_argument("--tiny-only", action="store_true", help="tiny random models only: no pretrained, no bench")
    parser.add_argument("--out", type=Path, help="also write DIR/gpu_check.json")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda asked, but CUDA is not available here (torch "
              f"{torch.__version__}); use --device cpu for a dry run", file=sys.stderr)
        return 2
    started, device = time.perf_counter(), args.device
    clock = lambda: f"{time.perf_counter() - started:.0f} s"  # noqa: E731 (stamps show where the time goes)
    strict_float32()
    transformers.logging.set_verbosity_error()  # tiny configs' token-id warnings would break up the table
    transformers.logging.disable_progress_bar()  # GGUF de-quantizing bars too
    texts = TEXTS[:2] if args.quick else TEXTS
    lengths, repeats, warmup = ((16, 64), 2, 1) if args.quick else ((16, 64, 256, 512), 10, 3)
    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    results = {"device": device, "gpu": gpu, "torch": torch.__version__, "transformers": transformers.__version__,
               "quick": args.quick, "tiny_only": args.tiny_only, "parity": [], "bfloat16": [], "bench": [],
               "split": [], "interventions": []}
    print(f"device {device}{f' ({gpu})' if gpu else ''}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}, TF32 off")

    print(f"\n1. float32 parity vs HF eager (bounds: attention {ATTENTION_TOL:g}, hidden {HIDDEN_TOL:g})")
    print(f"{'model':38s} {'input':28s} {'tokens':>6s} {'|Δ attn|':>11s} {'|Δ hidden|':>11s}")
    for name, ours, reference, inputs in tiny_cases():
        parity(name, ours.to(device), reference.to(device), inputs, device, results)
    loaded = []
    for source in [] if args.tiny_only else PRETRAINED:
        if offline_path(source) is None:  # fail, never skip: the check is only meaningful with both models
            results["parity"].append({"model": source, "input": "not installed", "ok": False})
            print(f"{source:38s} not installed: {install_hint(source)}  FAIL")
            continue
        print(f"[{clock()}: loading {source}]")
        model = attnviz.load(source, device=None if device == "cuda" else device)  # None: see check 4
        reference = hf.reference_model(model.info.path).to(device)
        parity(source, model.module, reference, pretrained_inputs(model, texts), device, results, args.quick)
        loaded.append((model, reference))

    print(f"\n2. bfloat16, max |Δ| attention / hidden (measured, no bound) [{clock()}]")
    print(f"{'model':38s} {'ours16 vs HF16':>20s} {'ours16 vs fp32':>20s} {'HF16 vs fp32':>20s}")
    for row in results["bfloat16"]:
        cells = [f"{row[k][0]:.1e} / {row[k][1]:.1e}" for k in ("ours16_hf16", "ours16_fp32", "hf16_fp32")]
        print(f"{row['model']:38s} {cells[0]:>20s} {cells[1]:>20s} {cells[2]:>20s}  {'' if row['ok'] else 'NaN FAIL'}")

    print(f"\n3. model.run vs HF eager on {device} (median of {repeats} pairs, synchronized) [{clock()}]")
    print(f"{'model':38s} {'tokens':>6s} {'ours ms':>9s} {'HF ms':>9s} {'ratio':>6s}")
    for model, reference in loaded:
        for row in bench(model, reference, device, lengths, repeats, warmup):
            results["bench"].append(row)
            r = row
            print(f"{r['model']:38s} {r['tokens']:6d} {r['ours_ms']:9.1f} {r['hf_ms']:9.1f} {r['ratio']:6.2f}")
    if not loaded:
        print("(skipped: no pretrained model loaded)")

    # 4. With CUDA present, device=None must choose it, both in pick_device and in a real load.
    picked = pick_device(None)
    loaded_on = sorted({m.info.device for m, _ in loaded}) if device == "cuda" else []
    ok = (picked == "cuda" and all(d == "cuda" for d in loaded_on)) if torch.cuda.is_available() else None
    results["device_none"] = {"pick_device": picked, "loaded_on": loaded_on, "ok": ok}
    print(f"\n4. [{clock()}] device=None picks {picked!r}" + (f", loads landed on {loaded_on}" if loaded_on else "")
          + ("  (no CUDA here: not applicable)" if ok is None else f"  {_flag(ok)}"))

    print(f"\n5. split by a device map vs one device (bound {SPLIT_TOL:g}) [{clock()}]")
    print(f"{'model':38s} {'split':16s} {'devices':24s} {'|Δ attn|':>11s} {'|Δ hidden|':>11s}")
    split_check(device, loaded, results)

    print(f"\n6. interventions and the atlas, {device} vs cpu (bounds: grids {GRID_TOL:g}, atlas {ATLAS_TOL:g}; "
          f"seconds: wall, attribution's one pass shared by its grids) [{clock()}]")
    print(f"{'model':38s} {'what':28s} {'|Δ|':>11s} {'cpu s':>8s} {device + ' s':>9s}")
    atlas_texts = [text for text in TEXTS for _ in range(4)]
    smollm = [model for model, _ in loaded if model.info.name == PRETRAINED[1]]
    if smollm:
        interventions_check(PRETRAINED[1], smollm[0], patching.patch_pair(smollm[0], *AGREEMENT_PAIR), device,
                            atlas_texts, results)
    if args.tiny_only:
        tiny, _ = tiny_decoder("llama", bpe_tokenizer(True), seed=3, intermediate_size=37, max_position_embeddings=128)
        clean = (1, 17, 40, 23, 8, 51, 12, 33)
        pair = patching.PatchPair(clean, clean[:2] + (77,) + clean[3:], 7, 7, 5, 9, tuple((i, i) for i in range(8)))
        interventions_check("tiny llama (GQA)", tiny, pair, device, atlas_texts, results)
    if not results["interventions"]:
        print("(skipped: SmolLM2 not loaded)")

    failed = [f"parity {r['model']} {r['input']}" for r in results["parity"] if not r["ok"]]
    failed += [f"{r['model']} {r['what']}" for r in results["interventions"] if not r["ok"]]
    failed += [f"split {r['model']} {r['split']}" for r in results["split"] if not r["ok"]]
    failed += [f"bfloat16 {r['model']} (NaN)" for r in results["bfloat16"] if not r["ok"]]
    failed += ["device=None"] if ok is False else []
    results.update(passed=not failed, failed=failed, seconds=round(time.perf_counter() - started, 1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"\n{'PASS' if not failed else 'FAIL: ' + '; '.join(failed)} "
          f"({len(results['parity'])} parity rows, {results['seconds']} s on {device})")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
