"""gpt-oss checkpoints -> our pre-norm decoder with learned attention sinks, sliding/full layers, YaRN
rotary, biased attention and a mixture-of-experts MLP with biases (HF modeling_gpt_oss).

- Sinks: one learned logit per head joins each row's softmax and is dropped after it, so a row of the
  recorded attention sums to less than 1; the rest is the learned-sink mass.
- `layer_types` gives each layer "sliding_attention" (window `sliding_window`) or "full_attention".
- Router: top k of the biased logits, softmax over those k (our router "topk_softmax").
- Experts: HF stores gate_up_proj [E, C, 2F] with gate and up interleaved along the last axis (gate = [..., ::2],
  up = [..., 1::2]) and down_proj [E, F, C], both applied as x @ W. Ours is [E, 2F, C] gate rows then up rows
  and [E, C, F], applied as F.linear: de-interleaved and transposed here. The clamped SwiGLU:
  (clamp(up, -l, l) + 1) * g * sigmoid(1.702 g), g = clamp(gate, max=l).
"""

from __future__ import annotations

import torch

from attnviz.loading.converters.llama_like import convert_decoder, decoder_sizes, move_attention
from attnviz.loading.converters.rotary import rope_settings
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig

LAYER_TYPES = ("sliding_attention", "full_attention")
SWIGLU_ALPHA = 1.702  # the sigmoid gain attnviz.transformer.layers.MixtureOfExperts applies


def gpt_oss_config(hf: dict) -> ModelConfig:
    quantization = hf.get("quantization_config")
    if quantization:
        method = quantization.get("quant_method", "?") if isinstance(quantization, dict) else quantization
        raise ValueError(f"quantized gpt-oss checkpoints (quantization_config {method!r}) are not supported; "
                         "use a dequantized (bfloat16 or float32) checkpoint")
    alpha = hf.get("swiglu_alpha", SWIGLU_ALPHA)
    if alpha != SWIGLU_ALPHA:
        raise ValueError(f"swiglu_alpha {alpha} is not supported for gpt_oss; supported: {SWIGLU_ALPHA}")
    n_layers, n_heads = hf["num_hidden_layers"], hf["num_attention_heads"]
    layer_types = hf.get("layer_types") or [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]  # HF's default
    unknown = sorted(set(layer_types) - set(LAYER_TYPES))
    if unknown:
        raise ValueError(f"layer_types {unknown} are not supported for gpt_oss; supported: {', '.join(LAYER_TYPES)}")
    window = hf.get("sliding_window")
    theta, scaling = rope_settings(hf)
    bias = bool(hf.get("attention_bias", True))
    return ModelConfig(
        family="gpt_oss",
        **decoder_sizes(hf),
        head_dim=hf.get("head_dim") or hf["hidden_size"] // n_heads,
        norm="rmsnorm",
        norm_eps=hf.get("rms_norm_eps", 1e-5),
        norm_placement="pre",
        rope_theta=theta,
        rope_scaling=scaling,
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        layer_windows=tuple(window if kind == "sliding_attention" else None for kind in layer_types),
        attn_sinks=True,
        n_experts=hf["num_local_experts"],
        experts_per_token=hf["num_experts_per_tok"],
        router="topk_softmax",
        expert_glu="clamped_swiglu",
        glu_limit=float(hf.get("swiglu_limit", 7.0)),
    )


def _deinterleaved(gate_up: torch.Tensor) -> torch.Tensor:
    """[..., 2F] with gate and up alternating -> [..., 2F] as gate block, then up block."""
    return torch.cat((gate_up[..., ::2], gate_up[..., 1::2]), dim=-1)


def convert_gpt_oss(hf: dict, checkpoint: dict, model) -> dict:
    return convert_decoder(WeightLedger(checkpoint, "model."), model, attention=_attention_with_sinks,
                           mlp=_move_experts)


def _attention_with_sinks(w: WeightLedger, layer: str, ours: str, c) -> None:
    move_attention(w, layer, ours, c)
    w.move(f"{layer}self_attn.sinks", f"{ours}attn.sinks")


def _move_experts(w: WeightLedger, layer: str, ours: str, c) -> None:
    w.move(f"{layer}mlp.router.weight", f"{ours}mlp.router.weight")
    w.move(f"{layer}mlp.router.bias", f"{ours}mlp.router.bias")
    experts = f"{layer}mlp.experts."
    gate_up = w.take(f"{experts}gate_up_proj")  # E, C, 2F interleaved
    w.put(f"{ours}mlp.gate_up", _deinterleaved(gate_up).transpose(1, 2).contiguous())  # E, 2F, C
    w.put(f"{ours}mlp.gate_up_bias", _deinterleaved(w.take(f"{experts}gate_up_proj_bias")).contiguous())
    w.put(f"{ours}mlp.down", w.take(f"{experts}down_proj").transpose(1, 2).contiguous())  # E, C, F
    w.move(f"{experts}down_proj_bias", f"{ours}mlp.down_bias")
