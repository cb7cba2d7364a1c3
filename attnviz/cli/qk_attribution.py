"""`python -m attnviz qk --model SOURCE --text T --layer L --head H --query I --key J [--key2 J2] [--json]`:
one head's pre-softmax score of query I on key J split into (query component, key component) terms
(attnviz.readouts.qk_attribution); with --key2, the split of score(I, J) - score(I, J2)."""

from __future__ import annotations

import json

import attnviz

LARGEST = 12  # terms the table prints


def add_parser(commands) -> None:
    qk = commands.add_parser("qk", help="query-key attribution: one score split by the components that made "
                                        "its query and its key")
    qk.add_argument("--model", required=True)
    qk.add_argument("--text", required=True)
    qk.add_argument("--text-pair", help="an encoder's second sentence")
    for name, what in (("layer", "layer (0-based)"), ("head", "query head (0-based)"),
                       ("query", "query position (tokens as `tokens` lists them, special tokens included)"),
                       ("key", "key position")):
        qk.add_argument(f"--{name}", type=int, required=True, help=what)
    qk.add_argument("--key2", type=int, help="a second key of the row: split score(query, key) - score(query, key2)")
    qk.add_argument("--json", action="store_true", help="print the result as JSON (fields: docs/cli.md)")


def result(tokens: list[str], split) -> dict:
    """The JSON of docs/views/qk-attribution.md."""
    return {"tokens": tokens, "layer": split.layer, "head": split.head, "kv_head": split.kv_head,
            "query": split.query, "key": split.key, "key2": split.key2, "score": split.score,
            "softcap": split.softcap, "capped": split.capped,
            "terms": [{"query": t.query, "key": t.key, "value": t.value} for t in split.terms()],
            "sum": split.total}


def run(args) -> int:
    from attnviz.readouts.qk_attribution import qk_attribution

    model = attnviz.load(args.model)
    split = qk_attribution(model, args.text, args.layer, args.head, args.query, args.key, args.key2, args.text_pair)
    pair = () if args.text_pair is None else (args.text_pair,)  # an encoder-decoder's encode takes one text
    tokens = list(model.encode(args.text, *pair).tokens)
    if args.json:
        print(json.dumps(result(tokens, split)))
        return 0
    what = (f"score({args.query} {tokens[args.query]!r}, {args.key} {tokens[args.key]!r})" if args.key2 is None else
            f"score({args.query}, {args.key} {tokens[args.key]!r}) - score({args.query}, {args.key2} "
            f"{tokens[args.key2]!r})")
    cap = "" if split.softcap is None else f" (before the soft-cap; after it: {split.capped:.4f})"
    print(f"L{args.layer}.H{args.head} {what} = {split.score:.4f}{cap}; the terms sum to {split.total:.4f}")
    print(f"{'query component':24s} {'key component':24s} {'value':>10s}")
    for term in split.largest(LARGEST):
        print(f"{term.query:24s} {term.key:24s} {term.value:10.4f}")
    return 0
