"""Phi-3 and Phi-4 checkpoints (both `model_type` "phi3") -> our pre-norm decoder with RMSNorm, a gated
MLP and rotary positions.

What differs from Llama is the storage: the attention projections are one fused `qkv_proj` ([q; k; v]
rows: H*D query rows, then K*D key rows, then K*D value rows) and the MLP's gate and up projections one
`gate_up_proj` ([gate; up] rows), both split here. Long-context checkpoints use LongRoPE (short factors up to
`original_max_position_embeddings`, long factors beyond; attnviz.transformer.rope), Phi-4-mini rotates only
3/4 of each head (partial_rotary_factor 0.75), and a `sliding_window` is honoured as HF's eager path does.
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.llama_like import convert_decoder, decoder_sizes
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig

# The rope types HF's Phi3Config accepts; "su" and "yarn" are the names older Phi-3 configs gave LongRoPE
# (Phi3Config.convert_rope_params_to_dict maps them to "longrope").
PHI3_ROPE_TYPES = ("default", "longrope")
LEGACY_LONGROPE = ("su", "yarn")


def phi3_config(hf: dict) -> ModelConfig:
    n_heads = hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // n_heads
    theta, scaling, partial = _rope(hf)
    rotary_dim = int(head_dim * partial)  # HF: int(head_dim * partial_rotary_factor)
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"partial_rotary_factor {partial} gives an odd or empty rotary width {rotary_dim}")
    return ModelConfig(
        family="phi3",
        **decoder_sizes(hf),
        head_dim=head_dim,
        norm="rmsnorm",
        norm_eps=hf.get("rms_norm_eps", 1e-5),
        norm_placement="pre",
        gated_mlp=True,
        activation=activation(hf.get("hidden_act", "silu")),
        rope_theta=theta,
        rope_scaling=scaling,
        rotary_dim=None if rotary_dim == head_dim else rotary_dim,
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        sliding_window=hf.get("sliding_window"),
    )


def _rope(hf: dict) -> tuple[float, dict | None, float]:
    """(theta, scaling or None, partial rotary factor), with HF's precedence: transformers 5 keeps all three
    in `rope_parameters`; older configs have `rope_scaling` and top-level `rope_theta`/`partial_rotary_factor`."""
    params = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
    partial = float(params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)))
    rope_type = params.get("rope_type", params.get("type", "default"))
    rope_type = "longrope" if rope_type in LEGACY_LONGROPE else rope_type
    if rope_type not in PHI3_ROPE_TYPES:
        raise ValueError(f"rope_type {rope_type!r} is not supported for phi3; supported: {', '.join(PHI3_ROPE_TYPES)}")
    if rope_type == "default":
        return theta, None, partial
    missing = [name for name in ("short_factor", "long_factor") if not params.get(name)]
    if missing:
        raise ValueError(f"a longrope config needs {' and '.join(missing)} in rope_parameters")
    # HF gives Phi3Config's top-level original_max_position_embeddings (default 4096) priority over the one in
    # rope_parameters, and derives the scaling factor from max_position_embeddings when the config has none.
    original = hf.get("original_max_position_embeddings") or 4096
    return theta, {**params, "rope_type": "longrope", "original_max_position_embeddings": original,
                   "max_position_embeddings": hf["max_position_embeddings"]}, partial


def convert_phi3(hf: dict, checkpoint: dict, model) -> dict:
    return convert_decoder(WeightLedger(checkpoint, "model."), model, attention=_split_qkv, mlp=_split_gate_up)


def _split_qkv(w: WeightLedger, layer: str, ours: str, c) -> None:
    q_rows, kv_rows = c.n_heads * c.dim_per_head, c.kv_heads * c.dim_per_head
    q, k, v = w.take(f"{layer}self_attn.qkv_proj.weight").split([q_rows, kv_rows, kv_rows], dim=0)
    for name, weight in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
        w.put(f"{ours}attn.{name}.weight", weight.contiguous())
    w.move(f"{layer}self_attn.o_proj.weight", f"{ours}attn.o_proj.weight")


def _split_gate_up(w: WeightLedger, layer: str, ours: str, c) -> None:
    gate, up = w.take(f"{layer}mlp.gate_up_proj.weight").chunk(2, dim=0)  # HF: gate, up = h.chunk(2)
    w.put(f"{ours}mlp.gate_proj.weight", gate.contiguous())
    w.put(f"{ours}mlp.up_proj.weight", up.contiguous())
    w.move(f"{layer}mlp.down_proj.weight", f"{ours}mlp.down_proj.weight")
