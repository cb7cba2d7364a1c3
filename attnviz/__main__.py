"""Command line: `python -m attnviz {parity,bench,probe} --model SOURCE ...`."""

from __future__ import annotations

import argparse
import json
import logging
import sys

import attnviz

DEFAULT_TEXTS = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired.",
]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _lengths(text: str) -> list[int]:
    return [_positive_int(part.strip()) for part in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnviz", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    parity = commands.add_parser("parity", help="max |diff| of attentions and hidden states vs HF eager")
    parity.add_argument("--model", required=True)
    parity.add_argument("--text", action="append", help="text to compare on (repeatable)")
    parity.add_argument("--json", action="store_true")

    bench = commands.add_parser("bench", help="model.run against HF eager, side by side")
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
    probe.add_argument("--sep", default=" ", help='word separator for --conllu ("" for Chinese)')
    probe.add_argument("--json", action="store_true", help="print the JSON of docs/architecture.md")
    probe.add_argument("--batch-size", type=_positive_int, default=32)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        return {"parity": _parity, "bench": _bench, "probe": _probe}[args.command](args)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _parity(args) -> int:
    from attnviz.loading import hf
    from attnviz.parity import check_parity

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

    from attnviz.bench import bench, check_lengths

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


def _probe(args) -> int:
    from attnviz.probe import run_probe_command

    return run_probe_command(args)


if __name__ == "__main__":
    sys.exit(main())
