"""`python -m attnviz atlas build | metrics`: a head atlas over a corpus (attnviz.readouts.atlas): HeadVis's six
metrics of every head from one streaming pass, kept in `DIR/atlas.duckdb`, resumable; `metrics` prints them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attnviz
from attnviz.analysis.lines import Lines, base_name, json_object, opened, require

# attnviz.readouts.atlas (duckdb, torch) is imported inside run(): `python -m attnviz` loads torch only for a
# command that needs it (tests/cli/test_package.py).
SEQ_LEN = 512  # HeadVis's default --seq-len (attnviz.readouts.atlas.SEQ_LEN)


def _seq_len(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {value}")
    return value


def add_parser(commands) -> None:
    atlas = commands.add_parser("atlas", help="a head atlas over a corpus: HeadVis's six metrics of every head, "
                                              "stored in DuckDB, resumable")
    actions = atlas.add_subparsers(dest="atlas_command", required=True)
    build = actions.add_parser("build", help="build (or resume) an atlas")
    build.add_argument("--model", required=True)
    build.add_argument("--texts", required=True, help="a UTF-8 file: one text a line, or JSONL (a .jsonl file) "
                                                     "with a \"text\" field")
    build.add_argument("--out", required=True, help="the atlas folder (DIR/atlas.duckdb); run again to resume")
    build.add_argument("--seq-len", type=_seq_len, default=SEQ_LEN,
                       help="cut each text at this many tokens (default 512, as HeadVis)")
    shown = actions.add_parser("metrics", help="print an atlas's metrics")
    shown.add_argument("--atlas", required=True, help="the atlas folder")
    shown.add_argument("--json", action="store_true", help="print {model, n_texts, metrics: {name: [layer][head]}}")


def corpus_texts(path: str | Path) -> Iterator[str]:
    """The texts of a file, one at a time, read as a stream within `Lines`' limits: a .jsonl file's objects'
    "text" fields (blank ones left out, as HeadVis's pipeline leaves them), any other file's non-empty lines,
    stripped."""
    name, jsonl = base_name(path), str(path).lower().endswith(".jsonl")
    with opened(path) as f:
        lines = Lines(f, name)
        with lines.guard():
            for number, line in lines:
                if not line.strip():
                    continue
                if not jsonl:
                    yield line.strip()
                    continue
                text = json_object(line, f"{name}, line {number}", ("text",))["text"]
                require(isinstance(text, str), f"{name}, line {number}: \"text\" is not a string")
                if text.strip():
                    yield text


def run(args) -> int:
    if args.atlas_command == "metrics":
        return _metrics(args)
    from attnviz.readouts import atlas

    total = sum(1 for _ in corpus_texts(args.texts))  # the whole file checked before the model loads
    if not total:
        raise ValueError(f"{args.texts} has no texts")
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    loaded = time.perf_counter()

    def progress(done: int, _total) -> None:
        end = "\n" if done == total else ""
        print(f"\rtexts {done}/{total}", end=end, file=sys.stderr, flush=True)

    result = atlas.build(model, corpus_texts(args.texts), args.out, seq_len=args.seq_len, progress=progress)
    print(f"load {loaded - start:.1f} s, texts {time.perf_counter() - loaded:.1f} s; "
          f"{result['n_texts']} texts ({result['skipped']} of one token left out) in {atlas.atlas_path(args.out)}",
          file=sys.stderr)
    return 0


def _metrics(args) -> int:
    from attnviz.readouts import atlas

    result = atlas.metrics(args.atlas)
    if args.json:
        print(json.dumps(result))
        return 0
    state = "complete" if result["complete"] else "incomplete (run `atlas build` again to resume)"
    print(f"{result['model']}: {result['n_texts']} texts, seq_len {result['seq_len']}, {state}")
    for name, grid in result["metrics"].items():
        best = [(value, layer, head) for layer, row in enumerate(grid) for head, value in enumerate(row)
                if value is not None]
        top = ", ".join(f"L{layer}H{head} {value:.4f}" for value, layer, head in sorted(best, reverse=True)[:5])
        print(f"{name:22s} top 5: {top or '(no count)'}")
    return 0
