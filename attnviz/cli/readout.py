"""`python -m attnviz lens | attribute | routes`: the logit lens, direct logit attribution and information-flow
routes of one text at one position (attnviz.readouts), printed or as JSON (docs/cli.md)."""

from __future__ import annotations

import json
import sys

import attnviz

COMMANDS = ("lens", "attribute", "routes")


def add_parsers(commands) -> None:
    lens = commands.add_parser("lens", help="logit lens: the residual stream after every layer read as a prediction")
    _common(lens)
    lens.add_argument("--target", help="a token to follow across layers (one token, e.g. ' are'; default: the "
                                       "model's own top prediction)")
    lens.add_argument("--k", type=int, default=5, help="top tokens per layer")
    attribute = commands.add_parser("attribute", help="direct logit attribution to the embeddings, every head and MLP")
    _common(attribute)
    attribute.add_argument("--target", help="one token (default: the model's own top prediction)")
    attribute.add_argument("--contrast", help="one token: attribute the logit difference target - contrast")
    routes = commands.add_parser("routes", help="information-flow routes (Ferrando & Voita 2024) of the prediction")
    _common(routes)
    routes.add_argument("--threshold", type=float, default=0.04, help="the least edge importance kept (0..1)")


def _common(parser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--position", type=int, help="token index read (negative from the end; default: the last "
                                                     "token, or an encoder's mask)")
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    print(f"loading {args.model} ...", file=sys.stderr)
    model = attnviz.load(args.model)
    return {"lens": _lens, "attribute": _attribute, "routes": _routes}[args.command](model, args)


def _lens(model, args) -> int:
    from attnviz.readouts.logit_lens import logit_lens

    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    result = logit_lens(model, args.text, args.position, args.target, k=args.k)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"position {result.position} {result.tokens[result.position]!r}; target {result.target_text!r}")
    # Ranks from 1 (the top token), as the page shows them; the JSON's target_rank counts from 0.
    print(f"{'read':10s} {'rank (1=top)':>12s} {'prob':>7s}  top {args.k}")
    for i, label in enumerate(result.labels):
        top = ", ".join(f"{text!r} {p:.3f}" for text, p in zip(result.top_texts[i], result.top_probs[i]))
        print(f"{label:10s} {int(result.target_rank[i]) + 1:12d} {result.target_prob[i]:7.4f}  {top}")
    return 0


def _attribute(model, args) -> int:
    from attnviz.readouts.attribution import attribute

    result = attribute(model, args.text, args.target, args.contrast, args.position)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    what = repr(result.target_text) + ("" if result.contrast_id is None else f" - {result.contrast_text!r}")
    cap = " (before the final soft-cap)" if result.capped else ""
    print(f"position {result.position} {result.tokens[result.position]!r}: logit {what} = {result.value:.4f}{cap}")
    print(f"embeddings {result.embed:+.4f}, rest (biases) {result.rest:+.4f}, sum of parts {result.total():.4f}")
    order = sorted(((float(v), layer, head) for (layer, head), v in _cells(result.heads)), key=lambda c: -abs(c[0]))
    largest = ", ".join(f"{layer}.{head} {v:+.3f}" for v, layer, head in order[:10])
    print(f"largest heads (layer.head, 0-based): {largest}")
    print("MLPs: " + ", ".join(f"{layer} {v:+.3f}" for layer, v in enumerate(result.mlps)))
    return 0


def _routes(model, args) -> int:
    from attnviz.readouts.routes import routes

    graph = routes(model, args.text, args.position, args.threshold)
    if args.json:
        print(json.dumps(graph.to_json()))
        return 0
    print(f"position {graph.position} {graph.tokens[graph.position]!r}, threshold {graph.threshold}: "
          f"{len(graph.nodes)} nodes, {len(graph.edges)} edges")
    print("heads on the routes (layer.head, 0-based): " + ", ".join(f"{layer}.{head}" for layer, head in graph.heads()))
    return 0


def _cells(grid):
    for layer, row in enumerate(grid):
        for head, value in enumerate(row):
            yield (layer, head), value
