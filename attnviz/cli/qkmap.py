"""`python -m attnviz qkmap`: one head's queries and keys over a corpus as 2-D points (AttentionViz's
normalisation, then PCA; attnviz.readouts.qkmap)."""

from __future__ import annotations

import json
import sys
import time

import attnviz

# attnviz.readouts.qkmap is imported inside run(): `python -m attnviz` loads torch only for a command
# that needs it (tests/cli/test_package.py).
from attnviz.analysis.lines import base_name, opened, text_lines


def add_parser(commands) -> None:
    sub = commands.add_parser("qkmap", help="one head's queries and keys over a corpus in 2-D (AttentionViz)")
    sub.add_argument("--model", required=True)
    sub.add_argument("--layer", type=int, required=True)
    sub.add_argument("--head", type=int, required=True)
    sub.add_argument("--corpus", default="builtin:en",
                     help="builtin:en, builtin:zh, a .conllu treebank, or a UTF-8 file of one sentence a line")
    sub.add_argument("--sentences", type=int, default=200, help="the first N sentences (default 200)")
    sub.add_argument("--json", action="store_true", help="print JSON of the points")


def _sentences(corpus: str, most: int):
    """The corpus's first `most` sentences; a file is read only that far."""
    from attnviz.analysis.conllu import read_conllu_sentences
    from attnviz.readouts import qkmap

    if corpus.startswith("builtin:"):
        return qkmap.builtin_corpus(corpus.partition(":")[2])[:most]
    if corpus.lower().endswith(".conllu"):
        return qkmap.treebank_corpus(read_conllu_sentences(corpus, most=most))
    with opened(corpus) as f:
        return [qkmap.CorpusSentence(text) for text in text_lines(f, base_name(corpus), most=most)[0]]


def run(args) -> int:
    from attnviz.readouts import qkmap

    if args.sentences < 1:
        raise ValueError(f"--sentences must be >= 1, got {args.sentences}")
    sentences = _sentences(args.corpus, args.sentences)
    start = time.perf_counter()
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    loaded = time.perf_counter()
    found = qkmap.qk_map(model, sentences, args.layer, args.head,
                         progress=lambda done, total: print(f"sentences {done}/{total}", file=sys.stderr))
    print(f"load {loaded - start:.1f} s, map {time.perf_counter() - loaded:.1f} s", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "model": args.model, "layer": args.layer, "head": args.head, "corpus": args.corpus,
            "sentences": list(found.sentences), "scale": found.scale, "explained": list(found.explained),
            "points": [{"sentence": int(s), "position": int(p), "token": token, "tag": tag,
                        "query": [float(v) for v in q], "key": [float(v) for v in k]}
                       for s, p, token, tag, q, k in zip(found.sentence, found.position, found.tokens, found.tags,
                                                         found.query_points, found.key_points)]}))
        return 0
    print(f"{args.model} L{args.layer} H{args.head}: {len(found.sentences)} sentences, {found.n_points} tokens, "
          f"scale c = {found.scale:.4g}, PC1 {found.explained[0]:.1%}, PC2 {found.explained[1]:.1%}")
    return 0
