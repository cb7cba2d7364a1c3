"""`python -m attnviz sinks`: every head's mean attention to the first token over a set of texts, the share of
heads that are sinks at epsilon (Gu et al. 2024), and the first key's norm and cosine with the queries
(attnviz.readouts.sinks)."""

from __future__ import annotations

import json
import sys
import time

import attnviz
from attnviz.analysis.lines import read_text_lines
from attnviz.analysis.sink import FIRST_TOKEN_EPSILON

# attnviz.readouts.sinks is imported inside run(): `python -m attnviz` loads torch only for a command
# that needs it (tests/cli/test_package.py).


def add_parser(commands) -> None:
    sub = commands.add_parser("sinks", help="first-token attention per head and the sink ratio (Gu et al. 2024)")
    sub.add_argument("--model", required=True)
    sub.add_argument("--texts", help="a UTF-8 file, one text a line (default: the built-in texts, cut at 64 "
                                     "tokens)")
    sub.add_argument("--epsilon", type=float, default=FIRST_TOKEN_EPSILON,
                     help="a head is a sink when its mean is >= epsilon (default 0.3, Gu et al.)")
    sub.add_argument("--max-tokens", type=int, default=None,
                     help="cut each text here (default: 64 for the built-in texts; a file's "
                          "texts as `run` tokenizes them)")
    sub.add_argument("--json", action="store_true", help="print JSON (epsilon, ratio, heads and the key arrays)")


def read_texts(path: str) -> list[str]:
    """A file's non-empty lines, stripped."""
    texts = read_text_lines(path)
    if not texts:
        raise ValueError(f"{path} has no texts (one a line)")
    return texts


def _grid(array) -> list[list[float]]:
    return [[float(v) for v in row] for row in array]


def run(args) -> int:
    from attnviz.readouts import sinks

    if not 0.0 <= args.epsilon <= 1.0:
        raise ValueError(f"--epsilon must lie in [0, 1], got {args.epsilon}")
    texts = sinks.builtin_texts() if args.texts is None else read_texts(args.texts)
    max_tokens = args.max_tokens if args.max_tokens is not None or args.texts else sinks.TEXT_TOKENS
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    loaded = time.perf_counter()
    anatomy = sinks.sink_anatomy(model, texts, max_tokens=max_tokens,
                                 progress=lambda done, total: print(f"texts {done}/{total}", file=sys.stderr))
    print(f"load {loaded - start:.1f} s, texts {time.perf_counter() - loaded:.1f} s", file=sys.stderr)
    ratio = anatomy.ratio(args.epsilon)
    if args.json:
        print(json.dumps({
            "model": args.model, "texts": args.texts or "builtin", "max_tokens": max_tokens,
            "n_texts": anatomy.n_texts, "skipped": anatomy.skipped, "epsilon": args.epsilon, "ratio": ratio,
            "heads": _grid(anatomy.means), "first_key_norm": _grid(anatomy.first_key_norm),
            "other_key_norm": _grid(anatomy.other_key_norm), "query_cosine": _grid(anatomy.query_cosine),
            "sink_mass": _grid(anatomy.sink_mass)}))
        return 0
    info = model.info
    print(f"{args.model}: {info.n_layers} layers x {info.n_heads} heads, {anatomy.n_texts} texts"
          f"{f' ({anatomy.skipped} of one token left out)' if anatomy.skipped else ''}")
    print(f"sink ratio at epsilon {args.epsilon:g}: {ratio:.3f} (share of heads whose mean weight on the first "
          "token, over query positions after the first, is >= epsilon)")
    print(f"{'layer':>5s} {'mean':>6s} {'sinks':>5s} {'|k0|':>7s} {'|k_j|':>7s} {'cos':>6s}"
          "  (means over the layer's heads)")
    for layer in range(info.n_layers):
        row = anatomy.means[layer]
        print(f"{layer:5d} {row.mean():6.3f} {int((row >= args.epsilon).sum()):5d} "
              f"{anatomy.first_key_norm[layer].mean():7.2f} {anatomy.other_key_norm[layer].mean():7.2f} "
              f"{anatomy.query_cosine[layer].mean():6.3f}")
    return 0
