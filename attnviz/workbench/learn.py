"""The Learn page's computations: one attention module of each variant run live, MHA/MQA/GQA measured side
by side, MHA -> GQA conversion of the loaded model and KV-group distances, each stored once for everyone."""

from __future__ import annotations

import inspect

import torch

from attnviz.analysis.kv_groups import group_distances
from attnviz.attention_kinds.gqa_conversion import conversion_distances, group_choices  # noqa: F401

# The page reads the variants' names, the models that use each and the formulas' counts here.
from attnviz.attention_kinds.variants import (  # noqa: F401
    NAMED_MODELS,
    VARIANTS,
    compare,
    kv_heads_of,
    parameter_counts,
    peak_bytes,
)
from attnviz.loading.kinds import all_family_kinds
from attnviz.transformer.attention import MultiHeadAttention
from attnviz.workbench.shared import Workbench
from attnviz.workbench.traces import trace, trace_bytes

# The live comparison's bounds (N <= 256 and d_model <= 1024 through the controls' options): two layers,
# three cache lengths, 15 interleaved steps each, about a second on one shared CPU core.
MEASURE_LAYERS, MEASURE_LENGTHS, MEASURE_REPEATS = 2, (64, 256, 1024), 15
PERMUTATIONS = 999
RESULT_BYTES = 100_000  # a generous size of one stored result (a few arrays of one number per layer)
DEMO_TOKENS = 10


def module_demo(d_model: int, n_heads: int, n_kv_heads: int) -> dict:
    """One MultiHeadAttention of these sizes run on a random [2, 10, d_model] batch: its shapes, parameters,
    cache width and the KV head each query head reads."""
    layer = MultiHeadAttention(d_model, n_heads, n_kv_heads)
    with torch.no_grad():
        out, attn = layer(torch.randn(2, DEMO_TOKENS, d_model))
    return {"x": (2, DEMO_TOKENS, d_model), "out": tuple(out.shape), "attn": tuple(attn.shape),
            "head_dim": d_model // n_heads, "parameters": sum(p.numel() for p in layer.parameters()),
            "kv_group": list(layer.kv_group)}


def attention_source() -> str:
    """The code that computes every view: MultiHeadAttention.forward."""
    return inspect.getsource(MultiHeadAttention.forward)


def stored(bench: Workbench, key: tuple):
    return bench.views.get(key)


def measure_variants(bench: Workbench, d_model: int, n_heads: int, n_groups: int, n_tokens: int, progress=None):
    key = ("learn_variants", d_model, n_heads, n_groups, n_tokens)
    with bench.reserve(peak_bytes(d_model, n_heads, MEASURE_LAYERS, n_tokens, MEASURE_LENGTHS)):
        result = compare(d_model, n_heads, n_groups, MEASURE_LAYERS, n_tokens, MEASURE_LENGTHS, MEASURE_REPEATS,
                         progress=progress)
    bench.views.put(key, result, RESULT_BYTES)
    return result


def conversion(bench: Workbench, model, name: str, text: str, g: int):
    """MHA -> GQA(g) by mean-pooling the loaded model's K/V heads, and how far that moves its attention."""
    key = ("learn_conversion", name, text, g)
    enc = model.encode(text)
    config = model.config
    pooled = 2 * config.n_layers * config.d_model * g * config.dim_per_head * 4
    with bench.reserve(trace_bytes(model, len(enc.ids), 2) + pooled, keep_model=name):
        result = conversion_distances(model.module, enc.ids, g, enc.type_ids)
    bench.views.put(key, result, RESULT_BYTES)
    return result


def kv_group_distances(bench: Workbench, model, name: str, text: str):
    """Whether heads that share K/V attend alike (analysis.kv_groups), on the shared trace of `text`."""
    key = ("learn_kv_groups", name, text)
    held = trace(bench, name, text, None)
    rows = slice(1, None) if model.config.causal else None
    result = group_distances(held.attentions, held.kv_group, rows=rows, permutations=PERMUTATIONS)
    bench.views.put(key, result, RESULT_BYTES)
    return result


def attention_kinds(bench: Workbench) -> list:
    """The Learn page's table of attention kinds (loading.kinds), computed once per process."""
    return bench.shared_value(("attention_kinds",), all_family_kinds, lambda rows: 512 * len(rows))
