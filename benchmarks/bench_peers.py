"""attnviz beside TransformerLens (and Hugging Face's eager forward) on the same SmolLM2 weights, task by task
(issue 38): CPU seconds, one thread each, every tool in its own process, rounds interleaved.

    scripts/setup-peers.sh                                   # once: .venv-peers, with TransformerLens 4.3.0
    .venv/bin/python benchmarks/bench_peers.py --repeats 3 [--json OUT] [--before DIR] [--tasks heads,dla,...]

Each (task, tool) runs in a fresh Python of its own (this file with --child): torch.set_num_threads(1),
OMP_NUM_THREADS=MKL_NUM_THREADS=1; loading the model and preparing the task's inputs are not counted; one warm-up
(the task itself, or for a patching grid a few patched runs: ours the MLP column, TransformerLens two patches), then
`time.process_time()` around the task itself (once for a patching grid and the circuit, a few times for the short
tasks).
Rounds interleave the tools (round 1: the task by attnviz, by TransformerLens, by HF; round 2: the same, the
order rotated; ...), so a machine whose load drifts slows each tool alike; each cell is the median of its
samples over --repeats rounds. On a shared machine CPU seconds move less than wall seconds, but they still grow
under load (caches, SMT): compare columns of one run, not runs.

Tools (the columns):
- attnviz: this checkout, run by this Python (.venv).
- before: `--before DIR`, a checkout of an earlier commit (`git worktree add DIR REV`): its attnviz, run by the
  same Python, as a column of "before" figures. A task whose function that checkout lacks is skipped, with the
  reason printed.
- TransformerLens: 4's TransformerBridge over HF's LlamaForCausalLM (eager attention, compatibility mode), run by
  --peers-python (.venv-peers/bin/python, made by scripts/setup-peers.sh), on SmolLM2 saved as a transformers
  folder from the offline GGUF that attnviz loads (bench_atlas_headvis.hf_folder).
- HF eager: the base LlamaModel (no LM head, as attnviz's run) with output_attentions=True, the reference of the
  "forward with every attention map" rows.

Tasks: SmolLM2-135M on bench_patching.py's 12-token pair ("The keys ... house" / "The key ... house", " are" -
" is" after the last token, denoised: the clean run's activations into the corrupted run), normalised so 0 is
the corrupted run and 1 the clean one. Patching starts from each tool's prepared runs (ours `patching.prepare`,
TransformerLens's `run_with_cache` of the clean run), not counted. The attribution rows have no TransformerLens
function: their TransformerLens cell is its exact heads grid (the row's ratio: how much faster the estimate is
than that grid). TransformerLens's heads x positions grid (3,240 full forwards, ~10 CPU-minutes) is timed on
every --tl-positions-stride'th cell and scaled up (each of its patches is one whole forward, so its cost is the
same per cell), marked "~". The circuit row times `circuit.find_circuit` whole (it prepares its own runs: EAP-IG's
scores, the circuit, its faithfulness beside random circuits); a row whose attnviz function does not exist yet is
printed as skipped (PENDING_ROWS). Direct logit attribution: every head's share of the " are" - " is" logit
difference after the last token of the clean text, from its own forward pass (ours `attribute`; TransformerLens
`run_with_cache`, `stack_head_results(apply_ln=True)` onto W_U's two columns). Logit lens: every read (the stream
entering each layer, after its attention, the final state: 61) at the last token through the final norm and the
head, top 5 and the target's probability (ours `logit_lens(grid=False)`; TransformerLens `accumulated_resid(
incl_mid=True)`, `ln_final`, `unembed`). Forward: ours `model.run`, TransformerLens `run_with_cache` of every
hook_pattern with return_type=None, HF `output_attentions=True`, on the same 64 or 512 token ids.

After the table, checks that the columns compute the same thing: ours against TransformerLens and the earlier
checkout (patching grids within 1e-3 in normalised units, direct logit attribution within 1e-3 logits, the lens'
top tokens equal and probabilities within 1e-3) and every tool's attention maps against HF's (1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
PAIR = ("The keys to the cabinet in the hall of the old house", "The key to the cabinet in the hall of the old house",
        " are", " is")  # bench_patching.py's DECODER_PAIR
TOLERANCE = {"grid": 1e-3, "logit": 1e-3, "prob": 1e-3, "maps": 1e-4}
TOOLS = ("ours", "before", "tl", "hf")


@dataclass(frozen=True)
class Task:
    label: str
    tools: tuple[str, ...]  # who runs it (the TransformerLens cell of the attribution rows is its heads grid)
    inner: int = 1  # timed runs per process
    reference: str = "ours"  # what the ratios divide by


TASKS = {
    "heads": Task("patching, heads grid (270 patches, 12 tokens)", ("ours", "before", "tl")),
    "residual": Task("patching, residual stream (360 patches)", ("ours", "before", "tl")),
    "head_positions": Task("patching, heads x positions grid (3,240 patches)", ("ours", "before", "tl")),
    "attribution": Task("attribution patching, every grid (one forward + backward)", ("ours", "before"), 3),
    "attribution_check": Task("attribution heads grid + exact check of its top 10", ("ours", "before"), 3),
    # PENDING_ROWS: rows whose attnviz function another change adds; until it lands they print as skipped.
    "circuit": Task("circuit of heads (EAP-IG, `circuit.find_circuit` with its defaults)", ("ours", "before")),
    "dla": Task("direct logit attribution per head", ("ours", "before", "tl"), 5),
    "lens": Task("logit lens, every layer", ("ours", "before", "tl"), 5),
    "forward64": Task("forward with every attention map, 64 tokens", ("ours", "before", "tl", "hf"), 5, "hf"),
    "forward512": Task("forward with every attention map, 512 tokens", ("ours", "before", "tl", "hf"), 3, "hf"),
}
BORROWED = {("attribution", "tl"): "heads", ("attribution_check", "tl"): "heads"}  # cell: that task's samples


class Unavailable(Exception):
    """The tool has no such function (an earlier checkout, a row not landed yet): the cell is skipped."""


# --- the children ----------------------------------------------------------------------------------------------


def timed(warm, work, inner: int) -> tuple[list[float], object]:
    warm()
    seconds, result = [], None
    for _ in range(inner):
        start = time.process_time()
        result = work()
        seconds.append(time.process_time() - start)
    return seconds, result


def ours_task(spec: dict):
    """(warm-up, work, result -> arrays) of one task in the attnviz first on sys.path."""
    import numpy as np

    import attnviz
    from attnviz.interventions import patching

    task = spec["task"]
    model = attnviz.load(SMOLLM)
    if task.startswith("forward"):
        text = spec["texts"][task]
        return (lambda: model.run(text), lambda: model.run(text),
                lambda trace: {"last_rows": trace.attentions[:, :, -1, :]})
    if task in ("dla", "lens"):
        from attnviz.readouts.attribution import attribute
        from attnviz.readouts.logit_lens import logit_lens
        text = PAIR[0]
        if task == "dla":
            run = lambda: attribute(model, text, PAIR[2], PAIR[3])  # noqa: E731
            return run, run, lambda found: {"heads": found.heads}
        run = lambda: logit_lens(model, text, target=PAIR[2], grid=False)  # noqa: E731
        return run, run, lambda found: {"top1": found.top_ids[:, 0], "target_prob": found.target_prob}
    pair = patching.patch_pair(model, *PAIR)
    runs = patching.prepare(model.module, pair)
    warm = lambda: patching.mlps(runs)  # noqa: E731  (30 patched runs, one from each layer)
    if task == "heads":
        return warm, lambda: patching.heads(runs), lambda grid: {"grid": grid}
    if task == "residual":
        return warm, lambda: patching.residual(runs), lambda grid: {"grid": grid}
    try:
        from attnviz.interventions import attribution_patching as ap
    except ImportError:
        ap = None
    if task == "head_positions":
        if ap is not None:
            return warm, lambda: ap.exact_grid(runs, "head_positions"), lambda grid: {"grid": grid}
        c = model.config  # an earlier checkout: the same components through patching.scan, as exact_grid does
        cells = [(layer, head, t) for layer in range(c.n_layers) for head in range(c.n_heads)
                 for t in range(len(pair.corrupt_ids))]

        def scanned():
            values = patching.scan(runs, [(layer, "head_outputs", head, t) for layer, head, t in cells],
                                   None, None, None)
            return values.reshape(c.n_layers, c.n_heads, -1)
        return warm, scanned, lambda grid: {"grid": grid}
    if task in ("attribution", "attribution_check"):
        if ap is None:
            raise Unavailable("no attnviz.interventions.attribution_patching")
        if task == "attribution":
            run = lambda: ap.estimate(runs)  # noqa: E731
            return run, run, lambda found: {"heads": found.heads}

        def checked():
            return ap.check_top(runs, ap.estimate(runs).heads, 10)
        return checked, checked, lambda found: {"cells": np.array(found.cells), "exact": found.exact}
    if task == "circuit":  # PENDING_ROWS: a row for a function another change adds, skipped until it lands
        try:
            from attnviz.interventions import circuit
        except ImportError as error:
            raise Unavailable(f"attnviz.interventions.circuit is not importable ({error}): EAP not landed") from None
        if not hasattr(circuit, "find_circuit"):
            raise Unavailable("attnviz.interventions.circuit has no find_circuit (yet)")

        def found():  # scores, the circuit of the top edges, its faithfulness beside random circuits (its defaults)
            return circuit.find_circuit(model.module, pair)
        return found, found, lambda result: {"faithfulness": result.faithfulness,
                                             "edges": len(result.circuit.edges)}
    raise Unavailable(f"no task {task!r}")


def tl_task(spec: dict):
    """The same tasks with TransformerLens 4 (TransformerBridge over HF's model)."""
    import pandas as pd
    import torch
    import transformers as tf
    from transformer_lens import patching as tl_patching
    from transformer_lens.model_bridge import TransformerBridge

    task, folder = spec["task"], spec["hf_folder"]
    hf = tf.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = tf.AutoTokenizer.from_pretrained(folder)
    bridge = TransformerBridge.boot_transformers(folder, hf_model=hf, tokenizer=tokenizer)
    bridge.enable_compatibility_mode()
    if task.startswith("forward"):
        ids = torch.tensor([spec["ids"][task]])

        def maps():  # every attention map cached, no logits asked for
            with torch.no_grad():
                return bridge.run_with_cache(ids, return_type=None, names_filter=lambda n: n.endswith("hook_pattern"))
        return maps, maps, lambda found: {"last_rows": torch.stack(
            [found[1][f"blocks.{layer}.attn.hook_pattern"][0, :, -1] for layer in range(bridge.cfg.n_layers)]
        ).numpy()}
    target, contrast = spec["target_id"], spec["contrast_id"]
    if task in ("dla", "lens"):
        ids = torch.tensor([spec["clean_ids"]])
        if task == "dla":
            def dla():  # every head's output at the last position through the frozen final norm, onto W_U's columns
                with torch.no_grad():
                    _, cache = bridge.run_with_cache(ids)
                    stack = cache.stack_head_results(layer=-1, pos_slice=-1, apply_ln=True)[:, 0]  # L*H, C
                    return stack @ (bridge.W_U[:, target] - bridge.W_U[:, contrast])
            return dla, dla, lambda heads: {"heads": heads.double().numpy().reshape(bridge.cfg.n_layers, -1)}

        def lens():  # every read (resid_pre and resid_mid of each layer, the final state) through the final norm
            with torch.no_grad():
                _, cache = bridge.run_with_cache(ids)
                reads = cache.accumulated_resid(incl_mid=True, pos_slice=-1)[:, 0]  # R, C
                probs = torch.softmax(bridge.unembed(bridge.ln_final(reads[:, None]))[:, 0].float(), -1)  # R, V
                top = probs.topk(5, dim=-1)
                return top.indices, probs[:, target]
        return lens, lens, lambda found: {"top1": found[0][:, 0].numpy(), "target_prob": found[1].double().numpy()}
    clean, corrupt = torch.tensor([spec["clean_ids"]]), torch.tensor([spec["corrupt_ids"]])
    position = spec["corrupt_position"]
    with torch.no_grad():
        _, cache = bridge.run_with_cache(clean)

        def diff(logits):
            return logits[0, position, target] - logits[0, position, contrast]
        clean_value, corrupt_value = float(diff(bridge(clean))), float(diff(bridge(corrupt)))

    def metric(logits):
        return (diff(logits) - corrupt_value) / (clean_value - corrupt_value)
    few = pd.DataFrame([[29, 0], [15, 3]], columns=["layer", "pos"])

    def warm():  # two patched forwards
        tl_patching.get_act_patch_resid_pre(bridge, corrupt, cache, metric, index_axis_names=None, index_df=few)
    if task == "heads":
        return (warm, lambda: tl_patching.get_act_patch_attn_head_out_all_pos(bridge, corrupt, cache, metric),
                lambda grid: {"grid": grid.double().numpy()})
    if task == "residual":
        return (warm, lambda: tl_patching.get_act_patch_resid_pre(bridge, corrupt, cache, metric),
                lambda grid: {"grid": grid.double().numpy()})
    if task == "head_positions":
        c, n = bridge.cfg, corrupt.shape[1]
        every = [(layer, t, head) for layer in range(c.n_layers) for t in range(n) for head in range(c.n_heads)]
        cells = every[::spec["stride"]]
        frame = pd.DataFrame(cells, columns=["layer", "pos", "head_index"])

        def sampled():
            return tl_patching.get_act_patch_attn_head_out_by_pos(bridge, corrupt, cache, metric,
                                                                  index_axis_names=None, index_df=frame)
        return warm, sampled, lambda values: {"cells": frame.to_numpy(), "values": values.double().numpy(),
                                              "scale": len(every) / len(cells)}
    raise Unavailable(f"TransformerLens has no counterpart of {task!r} here")


def hf_task(spec: dict):
    """HF's base model (no LM head), eager attention, every map returned."""
    import torch
    import transformers as tf

    task = spec["task"]
    if not task.startswith("forward"):
        raise Unavailable(f"HF eager is the reference of the forward rows only, not {task!r}")
    model = tf.AutoModel.from_pretrained(spec["hf_folder"], dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([spec["ids"][task]])

    def forward():
        with torch.inference_mode():
            return model(input_ids=ids, output_attentions=True, use_cache=False)
    return forward, forward, lambda out: {"last_rows": torch.stack([a[0, :, -1] for a in out.attentions]).numpy()}


def child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    import numpy as np

    meta = {"python": sys.executable}
    arrays = {}
    try:
        if spec["tool"] in ("ours", "before"):
            sys.path.insert(0, spec["root"])  # that checkout's attnviz, before any installed one
        import torch

        torch.set_num_threads(1)
        make = {"ours": ours_task, "before": ours_task, "tl": tl_task, "hf": hf_task}[spec["tool"]]
        warm, work, arrays_of = make(spec)
        seconds, result = timed(warm, work, spec["inner"])
        arrays = {key: np.asarray(value) for key, value in arrays_of(result).items()}
        meta["seconds"] = seconds
        if spec["tool"] in ("ours", "before"):
            import attnviz
            meta["attnviz"] = attnviz.__file__
    except Unavailable as reason:
        meta["skipped"] = str(reason)
    np.savez(spec["out"], meta=np.array(json.dumps(meta)), **arrays)


# --- the parent ------------------------------------------------------------------------------------------------


def inputs(model) -> dict:
    """What every child needs, tokenised once by attnviz: the pair, the texts of the forward rows and their ids."""
    from bench_readout import text_of  # noqa: E402 (this folder is the script's sys.path[0])

    from attnviz.interventions import patching

    pair = patching.patch_pair(model, *PAIR)
    texts = {f"forward{n}": text_of(model, n) for n in (64, 512)}
    ids = {name: model.encode(text).ids for name, text in texts.items()}
    return {"clean_ids": list(pair.clean_ids), "corrupt_ids": list(pair.corrupt_ids), "target_id": pair.target_id,
            "contrast_id": pair.contrast_id, "corrupt_position": pair.corrupt_position, "texts": texts,
            "ids": {name: list(value) for name, value in ids.items()}}


def run_child(python: str, spec: dict, scratch: Path, name: str):
    """(meta, arrays) of one child, or (None, error text)."""
    import numpy as np

    spec = dict(spec, out=str(scratch / f"{name}.npz"))
    path = scratch / f"{name}.json"
    path.write_text(json.dumps(spec))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error", TQDM_DISABLE="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([python, str(Path(__file__).resolve()), "--child", str(path)], capture_output=True,
                          text=True, env=env, cwd=spec.get("root", str(ROOT)))
    if done.returncode:
        return None, done.stderr[-2000:]
    with np.load(spec["out"]) as found:
        meta = json.loads(str(found["meta"]))
        return meta, {key: found[key] for key in found.files if key != "meta"}


def cell(values: list[float] | None, reference: float | None, estimated: bool) -> str:
    if not values:
        return "—"
    median = statistics.median(values)
    digits = 3 if median < 1 else 2 if median < 10 else 1 if median < 100 else 0
    text = ("~" if estimated else "") + f"{median:.{digits}f}"
    if reference and reference > 0:
        ratio = median / reference
        text += f" ({ratio:.{2 if ratio < 10 else 1 if ratio < 100 else 0}f}x)"
    return text


def checks(found: dict) -> list[str]:
    """Agreement between the columns, where they compute the same thing."""
    import numpy as np

    lines = []

    def compare(what, a, b, tolerance):
        worst = float(np.nanmax(np.abs(np.asarray(a, float) - np.asarray(b, float))))
        lines.append(f"{what}: max |difference| {worst:.1e} ({'ok' if worst <= tolerance else 'DIFFERS'}, "
                     f"tolerance {tolerance:g})")

    def arrays(task, tool):
        return found.get((task, tool))

    for task in ("heads", "residual"):
        ours = arrays(task, "ours")
        for tool, name in (("tl", "TransformerLens"), ("before", "before")):
            other = arrays(task, tool)
            if ours and other:
                compare(f"{task}: attnviz against {name}", ours["grid"], other["grid"], TOLERANCE["grid"])
    ours, tl = arrays("head_positions", "ours"), arrays("head_positions", "tl")
    if ours and tl:
        cells = tl["cells"]  # layer, pos, head
        compare(f"head_positions: attnviz against TransformerLens at its {len(cells)} cells timed",
                ours["grid"][cells[:, 0], cells[:, 2], cells[:, 1]], tl["values"], TOLERANCE["grid"])
    if ours and arrays("head_positions", "before"):
        compare("head_positions: attnviz against before", ours["grid"], arrays("head_positions", "before")["grid"],
                TOLERANCE["grid"])
    tl_heads = arrays("heads", "tl") or arrays("heads", "ours")
    estimate = arrays("attribution", "ours")
    if estimate and tl_heads:
        a, e = estimate["heads"].ravel(), tl_heads["grid"].ravel()
        top_a, top_e = set(np.argsort(-np.abs(a))[:10]), set(np.argsort(-np.abs(e))[:10])
        lines.append(f"attribution: the estimate against the exact heads grid: Pearson r {np.corrcoef(a, e)[0, 1]:.3f},"
                     f" {len(top_a & top_e)} of the exact top 10 in its top 10 (an estimate: not expected equal)")
    check = arrays("attribution_check", "ours")
    if check and tl_heads:
        cells = check["cells"]
        compare("attribution_check: its exact top 10 against the exact heads grid", check["exact"],
                tl_heads["grid"][cells[:, 0], cells[:, 1]], TOLERANCE["grid"])
    found_circuit = arrays("circuit", "ours")
    if found_circuit:
        lines.append(f"circuit: {int(found_circuit['edges'])} edges, faithfulness "
                     f"{float(found_circuit['faithfulness']):.3f} (no other column computes one)")
    for tool, name in (("tl", "TransformerLens"), ("before", "before")):
        ours, other = arrays("dla", "ours"), arrays("dla", tool)
        if ours and other:
            compare(f"dla: attnviz against {name} (logits)", ours["heads"], other["heads"], TOLERANCE["logit"])
        ours, other = arrays("lens", "ours"), arrays("lens", tool)
        if ours and other:
            same = int((ours["top1"] == other["top1"]).sum())
            lines.append(f"lens: attnviz against {name}: top-1 token equal at {same} of {len(ours['top1'])} reads")
            compare(f"lens: attnviz against {name} (the target's probability)", ours["target_prob"],
                    other["target_prob"], TOLERANCE["prob"])
    for task in ("forward64", "forward512"):
        hf = arrays(task, "hf")
        for tool, name in (("ours", "attnviz"), ("before", "before"), ("tl", "TransformerLens")):
            other = arrays(task, tool)
            if hf and other:
                compare(f"{task}: {name}'s maps against HF eager's (every head's last row)", other["last_rows"],
                        hf["last_rows"], TOLERANCE["maps"])
    return lines


def version_of(python: str, package: str) -> str:
    done = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; each cell is the median")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of: {', '.join(TASKS)}")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, of: ours, before, tl, hf")
    parser.add_argument("--before", metavar="DIR", help="a checkout of an earlier commit, run as a third column")
    parser.add_argument("--peers-python", default=str(ROOT / ".venv-peers" / "bin" / "python"),
                        help="a Python with transformer_lens (scripts/setup-peers.sh)")
    parser.add_argument("--tl-positions-stride", type=int, default=10,
                        help="TransformerLens's heads x positions grid: time every N'th cell and scale (1: all)")
    parser.add_argument("--hf-folder", help="SmolLM2 as a transformers folder (made here when absent)")
    parser.add_argument("--json", metavar="OUT", help="every sample, median and check, as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    tasks = [name for name in args.tasks.split(",") if name]
    unknown = set(tasks) - set(TASKS) | set(args.tools.split(",")) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tasks or tools: {', '.join(sorted(unknown))}")
    tools = [tool for tool in args.tools.split(",") if tool != "before" or args.before]
    notes = []
    if "before" in args.tools.split(",") and not args.before:
        notes.append("before: no --before DIR given")
    if "tl" in tools and not Path(args.peers_python).exists():
        notes.append(f"TransformerLens: {args.peers_python} does not exist (run scripts/setup-peers.sh)")
        tools.remove("tl")
    pythons = {"ours": sys.executable, "before": sys.executable, "tl": args.peers_python, "hf": sys.executable}
    roots = {"ours": str(ROOT), "before": str(Path(args.before).resolve()) if args.before else None}

    sys.path.insert(0, str(ROOT))  # this checkout's attnviz, whichever one is installed
    from bench_atlas_headvis import hf_folder  # noqa: E402 (this folder is the script's sys.path[0])

    import attnviz

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        folder = Path(args.hf_folder) if args.hf_folder else scratch / "smollm2-hf"
        if ("tl" in tools or "hf" in tools) and not (folder / "config.json").exists():
            hf_folder(folder)
        base = dict(inputs(attnviz.load(SMOLLM)), hf_folder=str(folder), stride=args.tl_positions_stride)
        before_rev = ""
        if args.before:
            before_rev = subprocess.run(["git", "-C", args.before, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip() or Path(args.before).name
        tl_version = version_of(args.peers_python, "transformer_lens") if "tl" in tools else ""
        samples: dict[tuple, list[float]] = {}
        found: dict[tuple, dict] = {}
        skipped: dict[tuple, str] = {}
        started = time.monotonic()
        print(f"SmolLM2-135M, one thread per process, {args.repeats} interleaved rounds, CPU seconds (median)",
              flush=True)
        for round_ in range(args.repeats):
            for task in tasks:
                runners = [tool for tool in TASKS[task].tools if tool in tools]
                shift = round_ % len(runners) if runners else 0
                for tool in runners[shift:] + runners[:shift]:
                    if (task, tool) in skipped:
                        continue
                    spec = dict(base, task=task, tool=tool, inner=TASKS[task].inner, root=roots.get(tool) or
                                str(ROOT))
                    meta, arrays = run_child(pythons[tool], spec, scratch, f"{task}-{tool}-{round_}")
                    if meta is None:
                        skipped[(task, tool)] = "failed: " + arrays.strip().splitlines()[-1]
                        print(f"  {task} by {tool} failed:\n{arrays}", flush=True)
                    elif "skipped" in meta:
                        skipped[(task, tool)] = meta["skipped"]
                    else:
                        samples.setdefault((task, tool), []).extend(meta["seconds"])
                        found[(task, tool)] = arrays
                        print(f"  round {round_ + 1}: {task:18s} {tool:7s} "
                              f"{' '.join(f'{s:.3f}' for s in meta['seconds'])}", flush=True)
        elapsed = time.monotonic() - started
    for (task, tool), target in BORROWED.items():
        if (target, tool) in samples and task in tasks:
            samples[(task, tool)] = samples[(target, tool)]
    headers = {"ours": "attnviz", "before": f"attnviz before ({before_rev})", "tl": f"TransformerLens {tl_version}",
               "hf": "HF eager"}
    print()
    print("| task | " + " | ".join(headers[tool] for tool in tools) + " |")
    print("|---|" + "---|" * len(tools))
    rows = []
    for task in tasks:
        spec = TASKS[task]
        reference = samples.get((task, spec.reference))
        reference = statistics.median(reference) if reference else None
        cells, scaled = [], {}
        for tool in tools:
            values = samples.get((task, tool))
            estimated = task == "head_positions" and tool == "tl" and args.tl_positions_stride > 1
            if estimated and values:  # CPU seconds of the cells timed, times the grid's cells over those
                values = [v * float(found[(task, tool)]["scale"]) for v in values]
            scaled[tool] = values
            cells.append(cell(values, None if tool == spec.reference else reference, estimated))
        print(f"| {spec.label} | " + " | ".join(cells) + " |")
        rows.append({"task": task, "label": spec.label, "reference": spec.reference, "cells": dict(zip(tools, cells)),
                     "samples": scaled, "median": {tool: statistics.median(v) if v else None
                                                   for tool, v in scaled.items()}})
    print()
    print("Ratios: against attnviz, or HF eager in the forward rows. The TransformerLens cell of the attribution rows "
          "is its exact heads grid.")
    if "head_positions" in tasks and "tl" in tools and args.tl_positions_stride > 1:
        print(f"~: TransformerLens timed on every {args.tl_positions_stride}th cell of the grid, scaled up.")
    for (task, tool), reason in sorted(skipped.items()):
        print(f"skipped: {task} by {headers[tool]}: {reason}")
    for note in notes:
        print(f"skipped: {note}")
    agreement = checks(found)
    print("\nChecks (the same computation in each column):")
    for line in agreement:
        print(f"  {line}")
    print(f"\n({elapsed / 60:.1f} minutes, {platform.processor() or platform.machine()}, {os.cpu_count()} cores)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": SMOLLM, "repeats": args.repeats, "tools": {tool: headers[tool] for tool in tools},
            "tl_positions_stride": args.tl_positions_stride, "cores": os.cpu_count(),
            "rows": rows, "skipped": {f"{task}/{tool}": reason for (task, tool), reason in skipped.items()},
            "checks": agreement, "notes": notes, "minutes": elapsed / 60}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
