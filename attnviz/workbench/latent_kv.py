"""The Learn page's MLA row: KV cache bytes per token of MHA, GQA, MQA and MLA (attention_kinds.latent_kv) at the
original Transformer's size and at the loaded model's, measured once per size and shared by every visitor."""

from __future__ import annotations

from attnviz.attention_kinds.latent_kv import ORIGINAL, CacheSizes, measure, peak_bytes, sizes_of
from attnviz.transformer.config import ModelConfig
from attnviz.workbench.shared import Workbench

RESULT_BYTES = 10_000  # four rows of a few numbers


def cache_sizes(bench: Workbench, sizes: dict) -> CacheSizes:
    """`measure(**sizes)`, under the budget, stored under its sizes."""
    key = ("learn_latent_kv", tuple(sorted(sizes.items())))
    result = bench.views.get(key)
    if result is None:
        with bench.reserve(peak_bytes(**sizes)):
            result = measure(**sizes)
        bench.views.put(key, result, RESULT_BYTES)
    return result


def original_and_model(bench: Workbench, config=None) -> list[CacheSizes]:
    """The original Transformer's sizes, and the loaded model's when it is a decoder or encoder stack (a
    translation model's config is another class: its first size only)."""
    sizes = [dict(ORIGINAL)] + ([sizes_of(config)] if isinstance(config, ModelConfig) else [])
    return [cache_sizes(bench, size) for size in sizes]
