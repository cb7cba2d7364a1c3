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
    layers: tuple[tuple[str, int], ...]  # (layer kind, how many layers), in layer order of first appearance
    extras: tuple[tuple[str, dict], ...]  # what else changes the score: (key, values), the UI words them


def extras(config: ModelConfig) -> list[tuple[str, dict]]:
    """The score's ingredients beyond softmax(q.k / sqrt(D)) with learned or rotary positions, as
    (key, values) pairs (the Learn page words them in the visitor's language)."""
    c, found = config, []
    if c.attn_scale is not None:
        found.append(("scale", {"value": f"{c.attn_scale:.4g}", "dim": c.dim_per_head}))
    if c.qk_norm is not None:
        found.append((f"qk_norm_{c.qk_norm}", {}))
    if c.rotary_dim is not None and c.rope_theta is not None:
        found.append(("partial_rotary", {"dims": c.rotary_dim, "of": c.dim_per_head}))
    if c.local_rope_theta is not None:
        found.append(("local_rope", {"local": f"{c.local_rope_theta:g}", "full": f"{c.rope_theta:g}"}))
    if c.rope_scaling:
        found.append(("rope_scaling", {"kind": c.rope_scaling.get("rope_type")}))
    if c.attn_softcap is not None:
        found.append(("score_softcap", {"cap": f"{c.attn_softcap:g}"}))
    if c.final_softcap is not None:
        found.append(("logit_softcap", {"cap": f"{c.final_softcap:g}"}))
    if c.pos_att_type:
        found.append(("disentangled", {"terms": " + ".join(c.pos_att_type), "span": c.relative_span,
                                       "buckets": c.position_buckets or "—"}))
    if c.embedding_size is not None:
        found.append(("embedding_size", {"width": c.embedding_size}))
    if c.shared_layers:
        found.append(("shared_layers", {}))
    if c.kv_lora_rank is not None:
        found.append(("latent", {"rank": c.kv_lora_rank, "rope": c.qk_rope_head_dim}))
    if c.n_experts is not None:
        found.append(("experts", {"k": c.experts_per_token, "n": c.n_experts}))
    return found


def family_kinds(model_type: str, hf_config: dict) -> FamilyKinds:
    config = CONVERTERS[model_type].config(hf_config)
    counts = Counter(config.layer_kind(layer) for layer in range(config.n_layers))
    return FamilyKinds(model_type, families_by_type()[model_type].name, tuple(counts.items()),
                       tuple(extras(config)))


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
