"""Which kinds of attention the supported families use, read from their configs: for every model type in
the registry, transformers' default config (the reference checkpoint its docstring names) goes through our
converter, and the layers' kinds (`ModelConfig.layer_kind`) and the score's extras are counted. The Learn
page's table of attention kinds shows the result, so it can never claim a feature our module lacks.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from attnviz.loading import hf
from attnviz.loading.families import families_by_type
from attnviz.loading.registry import CONVERTERS
from attnviz.transformer.config import ModelConfig


class FamilyKinds(NamedTuple):
    model_type: str
    family: str
    layers: str  # e.g. "sliding 4096, soft-capped × 21 · full, soft-capped × 21"
    extras: str  # what else changes the score: "q/k norm per head", "partial rotary 25%", ...


def extras(config: ModelConfig) -> list[str]:
    """The score's ingredients beyond softmax(q.k / sqrt(D)) with learned or rotary positions."""
    found = []
    if config.attn_scale is not None:
        found.append(f"scale {config.attn_scale:.4g} (not 1/√{config.dim_per_head})")
    if config.qk_norm is not None:
        found.append("q/k norm " + ("per head" if config.qk_norm == "head" else "over the projection"))
    if config.rotary_dim is not None and config.rope_theta is not None:
        found.append(f"partial rotary {config.rotary_dim}/{config.dim_per_head} dims")
    if config.local_rope_theta is not None:
        found.append(f"rotary base {config.local_rope_theta:g} on windowed layers, {config.rope_theta:g} on full")
    if config.rope_scaling:
        found.append(f"rope scaling {config.rope_scaling.get('rope_type')}")
    if config.attn_softcap is not None:
        found.append(f"score soft-cap {config.attn_softcap:g}")
    if config.final_softcap is not None:
        found.append(f"logit soft-cap {config.final_softcap:g}")
    if config.pos_att_type:
        buckets = f", {config.position_buckets} log buckets" if config.position_buckets else ""
        found.append("disentangled: + " + " + ".join(config.pos_att_type) + f" (relative span {config.relative_span}"
                     f"{buckets})")
    if config.embedding_size is not None:
        found.append(f"embeddings {config.embedding_size} wide, projected in")
    if config.shared_layers:
        found.append("one layer's weights shared by all")
    if config.n_experts is not None:
        found.append(f"MLP: {config.experts_per_token} of {config.n_experts} experts")
    return found


def family_kinds(model_type: str, hf_config: dict) -> FamilyKinds:
    config = CONVERTERS[model_type].config(hf_config)
    counts = Counter(config.layer_kind(layer) for layer in range(config.n_layers))
    layers = " · ".join(f"{kind} × {n}" for kind, n in counts.items())
    return FamilyKinds(model_type, families_by_type()[model_type].name, layers,
                       ", ".join(extras(config)) or "—")


def all_family_kinds() -> list[FamilyKinds]:
    """One row per decoder or encoder model type (translation models have their own page), in registry order;
    a model type whose default config our converter refuses is left out."""
    rows = []
    for model_type, converter in CONVERTERS.items():
        if converter.module.__name__ != "Transformer":
            continue
        try:
            rows.append(family_kinds(model_type, hf.default_config(model_type)))
        except (ValueError, KeyError):  # a default our converter does not take (e.g. an option we refuse)
            continue
    return rows
