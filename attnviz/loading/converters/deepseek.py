"""DeepSeek-V2 and DeepSeek-V3 checkpoints (also Kimi K2, Moonlight: model_type deepseek_v3) -> our pre-norm
decoder with multi-head latent attention (attnviz.transformer.mla) and DeepSeekMoE blocks after the first
`first_k_dense_replace` dense ones (attnviz.transformer.deepseek_moe).

What is special here:
- the rotary part of each query head and of the shared key is stored in interleaved pairs (x0, x1), (x2, x3),
  ...: V2 rotates them as complex numbers, V3 with `rope_interleave` (its default) on the even/odd slices.
  The rows are permuted here into evens then odds, the split-half layout our rotary turns, and q.k is
  unchanged (the same permutation on both sides). V3 with rope_interleave False is split-half already.
- YaRN (DeepSeek's long-context checkpoints): HF multiplies the softmax scale by mscale(factor,
  mscale_all_dim)^2 (`yarn_apply_mscale`), besides the attention factor on cos and sin that rope.py makes;
  a config without `factor` takes max_position_embeddings / original_max_position_embeddings, as HF.
- experts: transformers 5 holds them as 3-D `mlp.experts.gate_up_proj` / `down_proj` (our layout); hub
  checkpoints keep one module per expert, `mlp.experts.N.{gate,up,down}_proj`, stacked here.
The multi-token-prediction layers of V3 checkpoints (layer index num_hidden_layers on) are not part of the
language model and are ignored, as HF does.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attnviz.loading.converters.llama import llama_config
from attnviz.loading.converters.llama_like import convert_decoder
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def deepseek_config(hf: dict) -> ModelConfig:
    model_type = hf["model_type"]
    if hf.get("mlp_bias"):
        raise ValueError(f"{model_type} with mlp_bias=True is not supported")
    head_dim = hf["qk_nope_head_dim"] + hf["qk_rope_head_dim"]
    # Llama's sizes, norms, gated SiLU MLP, rotary settings and attention_bias, under DeepSeek's name.
    dense = llama_config({**hf, "model_type": "llama", "head_dim": head_dim})
    scaling, scale = dense.rope_scaling, head_dim**-0.5
    if scaling is not None:
        if scaling.get("factor") is None and "original_max_position_embeddings" in scaling:
            scaling = {**scaling, "factor": hf["max_position_embeddings"] / scaling["original_max_position_embeddings"]}
        if scaling.get("mscale_all_dim"):  # HF's yarn_apply_mscale
            scale = scale * yarn_mscale(scaling["factor"], scaling["mscale_all_dim"]) ** 2
    v3 = model_type == "deepseek_v3"
    if v3:
        router, n_group, topk_group = "sigmoid_group", hf.get("n_group") or 1, hf.get("topk_group") or 1
    elif hf.get("topk_method", "greedy") == "group_limited_greedy":
        router, n_group, topk_group = "softmax_group", hf["n_group"], hf["topk_group"]
    elif hf.get("topk_method", "greedy") == "greedy":  # one group holding every expert: the plain top k
        router, n_group, topk_group = "softmax_group", 1, 1
    else:
        raise ValueError(f"topk_method {hf['topk_method']!r} is not supported for {model_type}")
    if not hf.get("num_experts_per_tok"):  # DeepSeek-V2's default config leaves it unset; HF cannot route then
        raise ValueError(f"{model_type} without num_experts_per_tok is not supported")
    return dataclasses.replace(
        dense,
        family=model_type,
        n_kv_heads=None,  # every head its own keys: no KV-head count
        rope_scaling=scaling,
        rotary_dim=hf["qk_rope_head_dim"],
        attn_scale=scale,
        kv_lora_rank=hf["kv_lora_rank"],
        q_lora_rank=hf.get("q_lora_rank"),
        qk_rope_head_dim=hf["qk_rope_head_dim"],
        v_head_dim=hf["v_head_dim"],
        n_experts=hf["n_routed_experts"],
        experts_per_token=hf["num_experts_per_tok"],
        router=router,
        n_shared_experts=hf.get("n_shared_experts") or 0,
        moe_d_ff=hf["moe_intermediate_size"],
        dense_layers=hf.get("first_k_dense_replace") or 0,
        n_group=n_group,
        topk_group=topk_group,
        routed_scaling_factor=float(hf.get("routed_scaling_factor", 1.0)),
        norm_topk_prob=bool(hf.get("norm_topk_prob")) and v3,  # V2's router never renormalises (HF)
    )


def interleaved(hf: dict) -> bool:
    """Whether the checkpoint's rotary rows are interleaved pairs: V2 always, V3 unless rope_interleave is off."""
    return hf["model_type"] == "deepseek_v2" or bool(hf.get("rope_interleave", True))


def convert_deepseek(hf: dict, checkpoint: dict, model) -> dict:
    permute = interleaved(hf)
    w = WeightLedger(checkpoint, "model.")
    n, extra = hf["num_hidden_layers"], hf.get("num_nextn_predict_layers") or hf.get("num_mtp_layers") or 0
    for mtp in range(n, n + extra):  # the multi-token-prediction layers: not the language model's
        w.ignore(rf"model\.layers\.{mtp}\..*")

    def attention(w, layer, ours, c):
        _move_attention(w, layer, ours, c, permute)

    return convert_decoder(w, model, attention=attention, mlp=_move_mlp)


def deinterleave(rows: torch.Tensor, start: int, width: int, period: int) -> torch.Tensor:
    """`rows` [N, ...] with the `width` rows from `start` in every `period` rows reordered from pairs
    (0, 1), (2, 3), ... into evens then odds (DeepSeek's interleaved rotary -> split-half)."""
    order = torch.arange(rows.shape[0]).view(-1, period)
    part = order[:, start:start + width]
    order[:, start:start + width] = torch.cat((part[:, 0::2], part[:, 1::2]), dim=1)
    return rows[order.flatten()]


def _move_attention(w: WeightLedger, layer: str, ours: str, c, permute: bool) -> None:
    attn, mine = f"{layer}self_attn.", f"{ours}attn."
    head, rope, latent = c.dim_per_head, c.qk_rope_head_dim, c.kv_lora_rank
    nope = head - rope

    def query_rows(t):
        return deinterleave(t, nope, rope, head) if permute else t

    def key_rows(t):
        return deinterleave(t, latent, rope, latent + rope) if permute else t

    if c.q_lora_rank is None:
        w.put(f"{mine}q_proj.weight", query_rows(w.take(f"{attn}q_proj.weight")))
    else:
        w.move(f"{attn}q_a_proj.weight", f"{mine}q_a_proj.weight")
        if c.qkv_bias:
            w.move(f"{attn}q_a_proj.bias", f"{mine}q_a_proj.bias")
        w.move(f"{attn}q_a_layernorm.weight", f"{mine}q_a_layernorm.weight")
        w.put(f"{mine}q_b_proj.weight", query_rows(w.take(f"{attn}q_b_proj.weight")))
    w.put(f"{mine}kv_a_proj_with_mqa.weight", key_rows(w.take(f"{attn}kv_a_proj_with_mqa.weight")))
    if c.qkv_bias:
        w.put(f"{mine}kv_a_proj_with_mqa.bias", key_rows(w.take(f"{attn}kv_a_proj_with_mqa.bias")))
    for name in ("kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"):
        w.move(f"{attn}{name}", f"{mine}{name}")
    if c.out_bias:
        w.move(f"{attn}o_proj.bias", f"{mine}o_proj.bias")


def _move_mlp(w: WeightLedger, layer: str, ours: str, c) -> None:
    mlp, mine = f"{layer}mlp.", f"{ours}mlp."
    if int(layer.split(".")[1]) < c.dense_layers:
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.move(f"{mlp}{name}.weight", f"{mine}{name}.weight")
        return
    w.move(f"{mlp}gate.weight", f"{mine}router.weight")
    if c.router == "sigmoid_group":
        w.move(f"{mlp}gate.e_score_correction_bias", f"{mine}e_score_correction_bias")
    if w.has(f"{mlp}experts.gate_up_proj"):  # transformers 5's in-memory layout
        w.move(f"{mlp}experts.gate_up_proj", f"{mine}gate_up")
        w.move(f"{mlp}experts.down_proj", f"{mine}down")
    else:  # the hub's per-expert layout
        experts = range(c.n_experts)
        gate = torch.stack([w.take(f"{mlp}experts.{e}.gate_proj.weight") for e in experts])  # E, F, C
        up = torch.stack([w.take(f"{mlp}experts.{e}.up_proj.weight") for e in experts])  # E, F, C
        w.put(f"{mine}gate_up", torch.cat((gate, up), dim=1))  # E, 2F, C
        w.put(f"{mine}down", torch.stack([w.take(f"{mlp}experts.{e}.down_proj.weight") for e in experts]))
    if c.n_shared_experts:
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.move(f"{mlp}shared_experts.{name}.weight", f"{mine}shared_experts.{name}.weight")
