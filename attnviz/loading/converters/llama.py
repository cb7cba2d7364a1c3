"""Llama-family checkpoints (Llama, Mistral, Qwen2) -> our pre-norm decoder with RMSNorm, a gated
MLP, rotary positions and grouped-query attention."""

from __future__ import annotations

from attnviz.loading.converters.llama_like import convert_llama_like, decoder_sizes
from attnviz.loading.converters.rotary import rope_settings
from attnviz.transformer.config import ModelConfig


def llama_config(hf: dict) -> ModelConfig:
    model_type = hf["model_type"]
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {hf['hidden_act']!r} is not supported for {model_type}")
    if model_type == "qwen2" and hf.get("use_sliding_window"):
        raise ValueError("Qwen2 with use_sliding_window=True is not supported")
    theta, scaling = rope_settings(hf)
    attention_bias = bool(hf.get("attention_bias", False))
    return ModelConfig(
        family="llama",
        **decoder_sizes(hf),
        head_dim=hf.get("head_dim"),
        norm="rmsnorm",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        norm_placement="pre",
        gated_mlp=True,
        activation="silu",
        rope_theta=theta,
        rope_scaling=scaling,
        qkv_bias=True if model_type == "qwen2" else attention_bias,  # Qwen2: q/k/v biases, no o bias
        out_bias=attention_bias,
        mlp_bias=bool(hf.get("mlp_bias", False)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        sliding_window=hf.get("sliding_window") if model_type == "mistral" else None,
    )


convert_llama = convert_llama_like  # the tensors of every Llama-shaped checkpoint under model.*
