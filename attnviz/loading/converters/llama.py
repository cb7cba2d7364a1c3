"""Llama-family checkpoints (Llama, Mistral, Qwen2) -> our pre-norm decoder with RMSNorm, a gated
MLP, rotary positions and grouped-query attention."""

from __future__ import annotations

from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig


def llama_config(hf: dict) -> ModelConfig:
    model_type = hf["model_type"]
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {hf['hidden_act']!r} is not supported for {model_type}")
    if model_type == "qwen2" and hf.get("use_sliding_window"):
        raise ValueError("Qwen2 with use_sliding_window=True is not supported")
    theta, scaling = _rope(hf)
    attention_bias = bool(hf.get("attention_bias", False))
    n_heads = hf["num_attention_heads"]
    return ModelConfig(
        family="llama",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads") or n_heads,
        head_dim=hf.get("head_dim"),
        d_ff=hf["intermediate_size"],
        causal=True,
        norm="rmsnorm",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        norm_placement="pre",
        gated_mlp=True,
        activation="silu",
        max_positions=None,
        rope_theta=theta,
        rope_scaling=scaling,
        qkv_bias=True if model_type == "qwen2" else attention_bias,  # Qwen2: q/k/v biases, no o bias
        out_bias=attention_bias,
        mlp_bias=bool(hf.get("mlp_bias", False)),
        lm_head=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        sliding_window=hf.get("sliding_window") if model_type == "mistral" else None,
    )


def _rope(hf: dict) -> tuple[float, dict | None]:
    """theta and scaling; transformers 5 keeps both in `rope_parameters`, older configs at top level."""
    params = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    theta = params.get("rope_theta", hf.get("rope_theta", 10000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    return float(theta), None if rope_type == "default" else {**params, "rope_type": rope_type}


def convert_llama(hf: dict, checkpoint: dict, model) -> dict:
    w = WeightLedger(checkpoint, "model.")
    w.move("embed_tokens.weight", "token_embedding.weight")
    c = model.config
    for i in range(c.n_layers):
        layer, ours = f"layers.{i}.", f"blocks.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.move(f"{layer}self_attn.{name}.weight", f"{ours}attn.{name}.weight")
            bias = c.out_bias if name == "o_proj" else c.qkv_bias
            if bias:
                w.move(f"{layer}self_attn.{name}.bias", f"{ours}attn.{name}.bias")
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.move(f"{layer}mlp.{name}.weight", f"{ours}mlp.{name}.weight")
            if c.mlp_bias:
                w.move(f"{layer}mlp.{name}.bias", f"{ours}mlp.{name}.bias")
        w.move(f"{layer}input_layernorm.weight", f"{ours}attn_norm.weight")
        w.move(f"{layer}post_attention_layernorm.weight", f"{ours}mlp_norm.weight")
    w.move("norm.weight", "final_norm.weight")
    w.unembedding(c.tie_word_embeddings)
    w.ignore(r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")  # recomputed from the config
    return w.finish(model)
