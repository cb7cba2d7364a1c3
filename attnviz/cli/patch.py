"""`python -m attnviz patch`: activation patching on one minimal pair (attnviz.interventions.patching): every
head's, every MLP's and the residual stream's normalised effect (0 = the corrupted run, 1 = the clean run).
`--attribution` estimates them instead from one forward and one backward pass
(attnviz.interventions.attribution_patching), and `--check K` patches each grid's top K exactly, `--check all`
every cell, with the agreement. `--circuit [N]` finds a circuit of about N edges between the embedding, the heads,
the MLPs and the logits (attnviz.interventions.circuit: EAP-IG scores, the circuit's faithfulness patched exactly,
random circuits of its size), and `--check K` then patches its top K edges exactly."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import attnviz
from attnviz.cli.arguments import int_at_least

CIRCUIT_EDGES = 100  # --circuit without N: readable as a graph, a share of the difference on SmolLM2's pairs


def _check(text: str) -> int | str:
    if text == "all":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {text!r}")
    return value


def add_parser(commands) -> None:
    patch = commands.add_parser("patch", help="activation patching on a minimal pair: heads, MLPs, residual stream")
    patch.add_argument("--model", required=True)
    patch.add_argument("--clean", required=True, help="the clean sentence, e.g. 'The keys to the cabinet'")
    patch.add_argument("--corrupt", required=True, help="the corrupted sentence, e.g. 'The key to the cabinet'")
    patch.add_argument("--target", help="one token the clean run should prefer, e.g. ' are' (mind the space)")
    patch.add_argument("--contrast", help="one token to subtract, e.g. ' is': the metric is their logit difference")
    patch.add_argument("--direction", choices=("denoise", "noise"), default="denoise",
                       help="denoise: the clean run's activations into the corrupted run; noise: the other way")
    patch.add_argument("--attribution", action="store_true",
                       help="estimate every grid to first order (attribution patching: one forward and one "
                            "backward pass) instead of patching each component")
    patch.add_argument("--check", type=_check, metavar="K|all",
                       help="with --attribution: patch each grid's top K estimated cells exactly, or every cell "
                            "('all'), and print the agreement; with --circuit: patch the top K edges exactly")
    patch.add_argument("--circuit", type=int_at_least(1), nargs="?", const=CIRCUIT_EDGES, metavar="N",
                       help=f"find a circuit of about N edges (default {CIRCUIT_EDGES}) by edge attribution patching "
                            "(EAP-IG), with its faithfulness and random circuits of its size, patched exactly")
    patch.add_argument("--steps", type=int_at_least(1),
                       help="with --circuit: integrated-gradient steps of the edge scores (default 5; 1: plain EAP)")
    patch.add_argument("--controls", type=int_at_least(1),
                       help="with --circuit: random circuits of each kind (uniform edges, random paths; default 10)")
    patch.add_argument("--json", action="store_true", help="print the result as JSON (fields: docs/cli.md)")


def _rounded(values):
    """Nested lists of floats, 6 decimals, NaN (an unaligned position) as null."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, list):
        return [_rounded(v) for v in values]
    return None if values != values else round(float(values), 6)


def _progress(done: int, total: int) -> None:
    if done == total or done % 256 == 0:
        print(f"patched {done}/{total}", file=sys.stderr)


def run(args) -> int:
    from attnviz.interventions import patching

    if args.circuit is not None and args.attribution:
        raise ValueError("--circuit and --attribution are two ways to read the pair: choose one")
    if args.check is not None and not (args.attribution or args.circuit is not None):
        raise ValueError("--check checks attribution patching's estimate: add --attribution (or --circuit)")
    if (args.steps is not None or args.controls is not None) and args.circuit is None:
        raise ValueError("--steps and --controls set how --circuit scores and controls: add --circuit")
    if args.check == "all" and args.circuit is not None:
        raise ValueError("--check all would patch every edge of the graph: give a number of top edges")
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    pair = patching.patch_pair(model, args.clean, args.corrupt, args.target, args.contrast)
    loaded = time.perf_counter()
    if args.attribution:
        return _attribution(args, model, pair, start, loaded)
    if args.circuit is not None:
        return _circuit(args, model, pair, start, loaded)
    result = patching.patch(model, pair, args.direction, progress=_progress)
    print(f"load {loaded - start:.1f} s, patching {time.perf_counter() - loaded:.1f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({**_header(args, pair, result.clean_value, result.corrupt_value, result.tokens),
                          "heads": _rounded(result.heads), "mlps": _rounded(result.mlps),
                          "residual": _rounded(result.residual)}))
        return 0
    _print_header(args, pair, result.clean_value, result.corrupt_value)
    print("heads, largest effect (layer, head, 0-based): " + _top_heads(result.heads))
    print("MLPs: " + " ".join(f"{v:.2f}" for v in result.mlps))
    return 0


def _header(args, pair, clean_value, corrupt_value, tokens) -> dict:
    return {"model": args.model, "direction": args.direction, "metric": pair.metric,
            "target_id": pair.target_id, "contrast_id": pair.contrast_id,
            "clean_value": _rounded(clean_value), "corrupt_value": _rounded(corrupt_value),
            "tokens": list(tokens), "clean_tokens": list(pair.clean_tokens),
            "corrupt_tokens": list(pair.corrupt_tokens), "aligned": [list(p) for p in pair.pairs]}


def _print_header(args, pair, clean_value, corrupt_value) -> None:
    print(f"{args.model}, {args.direction}: clean {clean_value:.4f}, corrupted {corrupt_value:.4f}"
          f" ({pair.metric}); 0 = corrupted, 1 = clean")


def _top_heads(grid, n: int = 5) -> str:
    top = sorted(((float(v), layer, head) for (layer, head), v in np.ndenumerate(grid)), reverse=True)[:n]
    return ", ".join(f"L{la}H{h} {v:.3f}" for v, la, h in top)


def _cell(grid: str, cell: tuple) -> str:
    """A grid cell in words: L3H2, L3H2@5 (position 5), MLP3, MLP3@5, L3@5 (the residual)."""
    layer, *rest = cell
    if grid in ("heads", "head_positions"):
        return f"L{layer}H{rest[0]}" + (f"@{rest[1]}" if len(rest) > 1 else "")
    return (f"MLP{layer}" if grid.startswith("mlp") else f"L{layer}") + (f"@{rest[0]}" if rest else "")


def _attribution(args, model, pair, start, loaded) -> int:
    from attnviz.interventions import attribution_patching as ap

    runs, estimate = ap.attribution_patch(model, pair, args.direction)
    estimated = time.perf_counter()
    checks, exact, agreements = {}, {}, {}
    if args.check == "all":
        exact = {grid: ap.exact_grid(runs, grid, progress=_progress) for grid in ap.GRIDS}
        agreements = {grid: ap.agreement(estimate.grid(grid), exact[grid]) for grid in ap.GRIDS}
    elif args.check is not None:
        checks = {grid: ap.check_top(runs, estimate.grid(grid), args.check, grid) for grid in ap.GRIDS}
    print(f"load {loaded - start:.1f} s, estimate {estimated - loaded:.1f} s"
          + (f", exact check {time.perf_counter() - estimated:.1f} s" if args.check is not None else ""),
          file=sys.stderr)
    tokens = pair.corrupt_tokens if args.direction == "denoise" else pair.clean_tokens
    if args.json:
        out = _header(args, pair, estimate.clean_value, estimate.corrupt_value, tokens)
        out["attribution"] = {grid: _rounded(estimate.grid(grid)) for grid in ap.GRIDS}
        out["attribution"]["notes"] = dict(estimate.notes)
        if checks:
            out["check"] = {grid: {"cells": [list(c) for c in ch.cells], "approx": _rounded(ch.approx),
                                   "exact": _rounded(ch.exact)} for grid, ch in checks.items()}
        if exact:
            out.update({grid: _rounded(exact[grid]) for grid in ("heads", "mlps", "residual")})
            out["exact"] = {grid: _rounded(exact[grid]) for grid in ("head_positions", "mlp_positions")}
            out["agreement"] = {grid: {"r": _rounded(a.r), "overlap": a.overlap, "k": a.k, "cells": a.cells}
                                for grid, a in agreements.items()}
        print(json.dumps(out))
        return 0
    _print_header(args, pair, estimate.clean_value, estimate.corrupt_value)
    print("attribution patching: every grid estimated to first order from one forward and one backward pass")
    print("heads, largest estimated effect (layer, head, 0-based): " + _top_heads(estimate.heads))
    print("MLPs, estimated: " + " ".join(f"{v:.2f}" for v in estimate.mlps))
    for grid in ap.GRIDS:
        print(f"  {grid}: {estimate.notes[grid]}")
    for grid, ch in checks.items():
        pairs = ", ".join(f"{_cell(grid, c)} {a:.3f} -> {e:.3f}" for c, a, e in zip(ch.cells, ch.approx, ch.exact))
        r = ap.agreement(ch.approx, ch.exact, len(ch.cells)).r
        print(f"{grid}, top {len(ch.cells)} checked exactly (estimate -> exact; r {r:.2f}): {pairs}")
    for grid, a in agreements.items():
        print(f"{grid} against exact patching: r {a.r:.3f}, {a.overlap} of the top {a.k} by |effect|")
    return 0


def _circuit(args, model, pair, start, loaded) -> int:
    from attnviz.interventions import circuit as circuits

    steps = args.steps or circuits.DEFAULT_STEPS
    found = circuits.find_circuit(model.module, pair, args.direction, args.circuit, steps, args.controls or 10,
                                  args.check or 0, progress=_progress)
    print(f"load {loaded - start:.1f} s, circuit {time.perf_counter() - loaded:.1f} s", file=sys.stderr)
    edges, chosen, graph = found.edges, found.circuit, found.edges.graph
    tokens = pair.corrupt_tokens if args.direction == "denoise" else pair.clean_tokens
    if args.json:
        out = _header(args, pair, edges.clean_value, edges.corrupt_value, tokens)
        out["circuit"] = {
            "steps": edges.steps, "requested": chosen.requested, "top": chosen.top,
            "nodes": list(edges.labels), "n_edges": int(graph.valid().sum()),
            "edges": [[u, v] for u, v in chosen.edges], "scores": _rounded(chosen.scores),
            "faithfulness": _rounded(found.faithfulness), "complete": _rounded(found.complete),
            "controls": {kind: _rounded(values) for kind, values in found.controls.items()}}
        if found.checked is not None:
            out["check"] = {"edges": [[u, v] for u, v in found.checked.edges],
                            "approx": _rounded(found.checked.approx), "exact": _rounded(found.checked.exact),
                            "r": _rounded(found.checked.agreement.r)}
        print(json.dumps(out))
        return 0
    _print_header(args, pair, edges.clean_value, edges.corrupt_value)
    print(f"edge attribution patching (EAP-IG, {edges.steps} steps): {graph.n_nodes} nodes, "
          f"{int(graph.valid().sum())} edges; the {chosen.top} strongest by |score| connect {len(chosen.edges)} "
          "from the embedding to the logits")
    print(f"faithfulness of the circuit alone: {found.faithfulness:.3f} (0 = corrupted, 1 = clean; every edge: "
          f"{found.complete:.3f})")
    for kind, words in (("paths", "random paths"), ("edges", "uniform edges")):
        values = found.controls[kind]
        print(f"  random circuits of {max(1, len(chosen.edges))} edges, {words}: mean {values.mean():.3f}, "
              f"max {values.max():.3f} ({values.size})")
    print("edges, largest |score| first (score: share of the logit difference, to first order):")
    for (u, v), score in zip(chosen.edges[:40], chosen.scores):
        print(f"  {edges.name((u, v))}  {score:+.3f}")
    if len(chosen.edges) > 40:
        print(f"  ... and {len(chosen.edges) - 40} more (--json lists them all)")
    if found.checked is not None:
        ch = found.checked
        pairs = ", ".join(f"{edges.name(e)} {a:.3f} -> {x:.3f}" for e, a, x in zip(ch.edges, ch.approx, ch.exact))
        print(f"top {len(ch.edges)} edges checked exactly alone (estimate -> exact; r {ch.agreement.r:.2f}): {pairs}")
    return 0
