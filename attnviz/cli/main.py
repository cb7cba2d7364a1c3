"""Command line: `python -m attnviz COMMAND --model SOURCE ...` (or `attnviz ...`, the console script an install
gives): parity, bench, probe, heads, blimp here; lens, attribute and routes (attnviz.cli.readout), qk, sinks,
qkmap, patch and replicate in their own modules; `attnviz app [streamlit options]` starts the app."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import attnviz
from attnviz.cli import atlas as atlas_cli
from attnviz.cli import patch as patch_cli
from attnviz.cli import qk_attribution, qkmap, readout, replicate, sinks
from attnviz.cli.arguments import int_at_least
from attnviz.memory.budget import BUDGET_VARIABLE
from attnviz.memory.ceiling import OverBudget

# What `--help` says to a person: what the tool does and how to start, not how the code is laid out.
DESCRIPTION = """See where every attention head of a pretrained transformer looks, and test what it does.
SOURCE (--model) is a Hugging Face model id, a local model folder or a .gguf file."""
EXAMPLES = """examples:
  {prog} app                                          open the web app
  {prog} probe --model SOURCE --probes builtin:en     which heads track subject-verb, coreference, ...
  {prog} lens --model SOURCE --text "The keys to the cabinet"
  {prog} patch --model SOURCE --clean "The keys to the cabinet" --corrupt "The key to the cabinet" \\
      --target " are" --contrast " is"
  {prog} replicate --list                             published findings about heads, checked here

Each command has its own --help. Output formats: docs/formats.md and docs/cli.md."""

DEFAULT_TEXTS = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired.",
]


_positive_int = int_at_least(1)


def _lengths(text: str) -> list[int]:
    return [_positive_int(part.strip()) for part in text.split(",")]


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The parser of every subcommand; tests read the subcommands from it (README and docs/cli.md name them)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=DESCRIPTION, epilog=EXAMPLES.format(prog=prog),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    app = commands.add_parser("app", help="open the web app (options after `app` go to streamlit)",
                              description="Start the app: `streamlit run` on the checkout's app.py; everything "
                                          "after `app` goes to streamlit (e.g. --server.port 8502).")
    app.add_argument("streamlit_args", nargs=argparse.REMAINDER, help="options for `streamlit run`")

    parity = commands.add_parser("parity", help="check our attentions and hidden states against Hugging Face's "
                                                    "(the largest difference)")
    parity.add_argument("--model", required=True)
    parity.add_argument("--text", action="append", help="text to compare on (repeatable)")
    parity.add_argument("--json", action="store_true")

    bench = commands.add_parser("bench", help="time our forward pass against Hugging Face's eager attention, "
                                               "side by side")
    bench.add_argument("--model", action="append", required=True, help="repeatable")
    bench.add_argument("--lengths", type=_lengths, default="16,64,256", help="comma-separated token counts")
    bench.add_argument("--repeats", type=_positive_int, default=15)

    probe = commands.add_parser("probe", help="score every head on relation probes (Clark et al. 2019)")
    probe.add_argument("--model", required=True)
    sources = probe.add_mutually_exclusive_group(required=True)
    sources.add_argument("--probes", help="FILE.jsonl or builtin[:en|:zh]")
    sources.add_argument("--conllu", help="a Universal Dependencies .conllu file")
    sources.add_argument("--winobias", help="a WinoBias file of bracketed sentences")
    probe.add_argument("--relation", help="only this relation")
    probe.add_argument("--sep", default=None, help="no longer used: a treebank is read from its own text "
                       "(# text, or its forms joined as SpaceAfter says); kept so old command lines run")
    probe.add_argument("--json", action="store_true", help="print the result as JSON (fields: docs/formats.md)")
    probe.add_argument("--batch-size", type=_positive_int, default=32)
    probe.add_argument("--sink-aware", action="store_true",
                       help="for decoders: word 0 (the first token's attention sink) is no candidate of a "
                            "head's argmax; the first-word baseline is reported beside")

    heads = commands.add_parser("heads", help="previous-token, duplicate-token and induction scores of every head")
    heads.add_argument("--model", required=True)
    heads.add_argument("--n", type=int, default=50, help="random tokens per copy (>= 2); sequences are 2n long")
    heads.add_argument("--sequences", type=int, default=4, help="how many random sequences to average over")
    heads.add_argument("--seed", type=int, default=0, help="seed of numpy's default_rng")
    heads.add_argument("--json", action="store_true", help="print the result as JSON (fields: docs/formats.md)")

    blimp = commands.add_parser("blimp", help="minimal pairs: how often the model prefers the grammatical sentence")
    blimp.add_argument("--model", required=True)
    blimp.add_argument("--data", help="a folder of BLiMP *.jsonl files, one .jsonl file, or builtin "
                                      "(default: $ATTNVIZ_DATA_DIR/blimp, else ../shared/data/blimp)")
    blimp.add_argument("--limit", type=_positive_int, help="only the first N pairs of each file")
    blimp.add_argument("--json", action="store_true", help="print JSON (per-file n, correct, accuracy, mean_margin)")

    qk_attribution.add_parser(commands)
    readout.add_parsers(commands)
    sinks.add_parser(commands)
    qkmap.add_parser(commands)
    replicate.add_parser(commands)
    patch_cli.add_parser(commands)
    atlas_cli.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = "attnviz" if Path(sys.argv[0]).name == "attnviz" else "python -m attnviz"  # the console script, or -m
    parser = build_parser(prog)
    if argv[:1] == ["app"] and argv[1:2] not in (["-h"], ["--help"]):
        # streamlit's options verbatim: argparse would read `--server.port 8502` as options of ours
        args = argparse.Namespace(command="app", streamlit_args=argv[1:])
    else:
        args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        if args.command in readout.COMMANDS:
            return readout.run(args)
        return {"app": _app, "parity": _parity, "bench": _bench, "probe": _probe, "heads": _heads,
                "blimp": _blimp, "qk": qk_attribution.run, "sinks": sinks.run, "qkmap": qkmap.run,
                "replicate": replicate.run,
                "patch": patch_cli.run, "atlas": atlas_cli.run}[args.command](args)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OverBudget as error:  # the memory ceiling of ATTNVIZ_MEMORY_BUDGET_GB (attnviz.memory.ceiling)
        print(f"error: {error} (the budget is {BUDGET_VARIABLE}; a larger one, or shorter or fewer texts)",
              file=sys.stderr)
        return 3


def _parity(args) -> int:
    from attnviz.loading import hf
    from attnviz.reference.parity import check_parity

    model = attnviz.load(args.model)
    reference = hf.reference_model(model.info.path)
    reports = [check_parity(model, text, reference=reference) for text in args.text or DEFAULT_TEXTS]
    worst_attention = max(r.max_attention_diff for r in reports)
    worst_hidden = max(r.max_hidden_diff for r in reports)
    ok = all(r.passed() for r in reports)
    if args.json:
        print(json.dumps({"model": args.model, "max_attention_diff": worst_attention,
                          "max_hidden_diff": worst_hidden, "passed": ok}))
    else:
        for text, r in zip(args.text or DEFAULT_TEXTS, reports):
            print(f"{r.n_tokens:4d} tokens  attention {r.max_attention_diff:.2e}  hidden {r.max_hidden_diff:.2e}"
                  f"  {text[:50]!r}")
        print(f"max |attention diff| {worst_attention:.2e} (bound 1e-5), "
              f"max |hidden diff| {worst_hidden:.2e} (bound 1e-4): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def _bench(args) -> int:
    import torch

    from attnviz.reference.bench import bench, check_lengths

    # Every model is loaded and checked before any timing: a bad length must not cost a finished run.
    models = [(source, attnviz.load(source)) for source in args.model]
    for _, model in models:
        check_lengths(model, args.lengths)
    print(f"threads: {torch.get_num_threads()}, repeats: {args.repeats}, median of per-pair ratios")
    print(f"{'model':45s} {'tokens':>6s} {'ours ms':>9s} {'HF ms':>9s} {'ratio':>6s}")
    for source, model in models:
        for row in bench(model, args.lengths, repeats=args.repeats):
            print(f"{source:45s} {row['tokens']:6d} {row['ours_ms']:9.1f} {row['hf_ms']:9.1f} {row['ratio']:6.2f}")
    return 0


def _app(args) -> int:
    from attnviz.cli.app import run_app_command

    return run_app_command(args)


def _probe(args) -> int:
    from attnviz.cli.probe import run_probe_command

    return run_probe_command(args)


def _blimp(args) -> int:
    from attnviz.cli.blimp import run_blimp_command

    return run_blimp_command(args)


def _heads(args) -> int:
    import time

    from attnviz.analysis.detectors import DETECTORS, detect_heads, top_heads

    if args.n < 2:
        raise ValueError(f"--n must be >= 2, got {args.n}")
    if args.sequences < 1:
        raise ValueError(f"--sequences must be >= 1, got {args.sequences}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    loaded = time.perf_counter()
    if 2 * args.n > model.info.max_tokens:
        raise ValueError(f"2n = {2 * args.n} tokens exceed this model's limit of {model.info.max_tokens}"
                         f" (use --n <= {model.info.max_tokens // 2})")

    def progress(done: int, total: int) -> None:
        print(f"sequence {done}/{total}", file=sys.stderr)

    scores = detect_heads(model, n=args.n, sequences=args.sequences, seed=args.seed, progress=progress)
    end = time.perf_counter()
    print(f"load {loaded - start:.1f} s, detectors {end - loaded:.1f} s", file=sys.stderr)
    if args.json:
        grids = {name: [[round(float(v), 4) for v in row] for row in scores[name]] for name in DETECTORS}
        print(json.dumps({"model": args.model, "n": args.n, "sequences": args.sequences, "seed": args.seed,
                          **grids}))
        return 0
    info = model.info
    print(f"{args.model}: {info.n_layers} layers x {info.n_heads} heads, {args.sequences} sequences of"
          f" {args.n} random tokens repeated twice (seed {args.seed})")
    for name in DETECTORS:
        best = ", ".join(f"L{layer}H{head} {score:.3f}" for layer, head, score in top_heads(scores[name]))
        print(f"{name:16s} top 5 (layer, head, 0-based): {best}")
    return 0

