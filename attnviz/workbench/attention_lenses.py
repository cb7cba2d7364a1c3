"""Lens weights (analysis.attention_lenses: value-weighted, rollout, flow) and the query-key view's queries and keys,
from one more recorded forward pass; shared like the views, under the memory budget. Their views are
workbench.views'."""

from __future__ import annotations

import numpy as np

from attnviz.analysis import attention_lenses
from attnviz.workbench.memory import trim_heap
from attnviz.workbench.shared import Workbench
from attnviz.workbench.shelf import model_for
from attnviz.workbench.traces import trace, trace_bytes


def value_norms(bench: Workbench, name: str, text: str, text_pair: str | None) -> np.ndarray:
    """||f_h(x_j)|| [L, H, S] float32 of a text (Recorder "value_norms"; model.run records none of it)."""
    def compute():
        model = model_for(bench, name)
        with bench.reserve(trace_bytes(model, len(model.encode(text, text_pair).ids)), keep_model=name):
            norms = model.record(text, text_pair, names=("value_norms",))["value_norms"]
            trim_heap()
        norms.setflags(write=False)
        return norms

    return bench.shared_value(("value_norms", name, text, text_pair), compute, lambda norms: norms.nbytes)


def lens_attentions(bench: Workbench, name: str, text: str, text_pair: str | None, lens: str,
                    normalise: bool = True):
    """Token-level lens weights, float16 read-only: [L, H, T, S] for "value", [L, 1, T, T] (one map per
    layer, shaped as one head) for "rollout" and "flow". Flow is a heavy action (`compute_flow`): None
    until some visitor has computed it."""
    if lens not in attention_lenses.LENSES or lens == "raw":
        raise ValueError(f"lens must be one of {attention_lenses.LENSES[1:]}, got {lens!r}")
    key = ("lens", name, text, text_pair, lens, bool(normalise) if lens == "value" else None)
    weights = bench.views.get(key)
    if weights is None and lens != "flow":
        held = trace(bench, name, text, text_pair)
        norms = value_norms(bench, name, text, text_pair) if lens == "value" else None  # before: it may load
        with bench.reserve(3 * held.attentions.nbytes, keep_model=name):  # float32 result + its float16 copy
            if lens == "value":
                weights = attention_lenses.value_weighted(held.attentions, norms, normalise)
            else:
                weights = attention_lenses.rollout(held.attentions)[:, None]
            weights = weights.astype(np.float16)
        weights.setflags(write=False)
        bench.views.put(key, weights, weights.nbytes)
    return weights


def compute_flow(bench: Workbench, name: str, text: str, text_pair: str | None, progress=None) -> np.ndarray:
    """Attention flow (analysis.attention_lenses.flow, at most FLOW_MAX_TOKENS tokens), computed once and shared."""
    done = bench.views.get(("lens", name, text, text_pair, "flow", None))
    if done is not None:
        return done
    held = trace(bench, name, text, text_pair)
    # The deepest layer's graph has (L + 1) T nodes, held as Python lists of floats (~32 bytes a cell: a
    # pointer and a float object), plus one residual copy per max-flow.
    nodes = (held.n_layers + 1) * len(held.tokens)
    with bench.reserve(2 * 32 * nodes * nodes, keep_model=name):
        weights = attention_lenses.flow(held.attentions, progress=progress)[:, None].astype(np.float16)
    weights.setflags(write=False)
    bench.views.put(("lens", name, text, text_pair, "flow", None), weights, weights.nbytes)
    return weights


def query_keys(bench: Workbench, name: str, text: str, text_pair: str | None, layer: int) -> dict:
    """One layer's queries [H, T, D] and keys [K, S, D] (after rotary), recorded for that layer only, and
    its score terms [N, H, T, S] where the score has several (DeBERTa: "score_terms")."""
    def compute():
        model = model_for(bench, name)
        with bench.reserve(trace_bytes(model, len(model.encode(text, text_pair).ids)), keep_model=name):
            terms = ("score_terms",) if model.score_term_names(layer) else ()  # DeBERTa's c2c, c2p, p2c
            held = model.record(text, text_pair, names=("queries", "keys", *terms), layer=layer)
        for array in held.values():
            array.setflags(write=False)
        return held

    return bench.shared_value(("query_keys", name, text, text_pair, layer), compute,
                              lambda held: sum(array.nbytes for array in held.values()))
