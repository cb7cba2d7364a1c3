"""Rotary settings of an HF config: theta and scaling (the Llama-shaped families), and the rotated share of
each head (the partial-rotary families, GPT-NeoX and Phi)."""

from __future__ import annotations

from attnviz.transformer.rope import SUPPORTED_ROPE_TYPES


def rope_settings(hf: dict) -> tuple[float, dict | None]:
    """theta and scaling; transformers 5 keeps both in `rope_parameters`, older configs at top level."""
    params = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    return float(theta), None if rope_type == "default" else {**params, "rope_type": rope_type}


def rotary_settings(hf: dict, head_dim: int, default_factor: float = 1.0) -> tuple[float, dict | None, int | None]:
    """(theta, scaling, rotary_dim): rotary_dim is None when the whole head rotates. transformers 5 keeps
    the rotated share in rope_parameters["partial_rotary_factor"]; older configs say rotary_pct (GPT-NeoX)
    or partial_rotary_factor at top level (Phi), and GPT-NeoX names its base rotary_emb_base."""
    params = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    theta, scaling = rope_settings(hf)
    if "rope_theta" not in params and "rotary_emb_base" in hf:
        theta = float(hf["rotary_emb_base"])
    rope_type = (scaling or {}).get("rope_type", "default")
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ValueError(f"rope_type {rope_type!r} is not supported for {hf.get('model_type')}; "
                         f"supported: {', '.join(SUPPORTED_ROPE_TYPES)}")
    factor = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", default_factor)))
    rotary_dim = int(head_dim * factor)  # HF's int(head_size * partial_rotary_factor)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"partial_rotary_factor {factor} leaves {rotary_dim} rotated dims of {head_dim}: need an even "
                         "number of at least 2")
    return theta, scaling, None if rotary_dim == head_dim else rotary_dim
