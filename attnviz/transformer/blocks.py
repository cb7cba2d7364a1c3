"""Transformer blocks: where the norms sit and how the two sublayers share the residual.

    post      x = norm1(x + attn(x));          x = norm2(x + mlp(x))          BERT, OPT-350m
    pre       x = x + attn(norm1(x));          x = x + mlp(norm2(x))          GPT-2, Llama
    sandwich  x = x + post1(attn(norm1(x)));   x = x + post2(mlp(norm2(x)))   Gemma 2/3
    after     x = x + post1(attn(x));          x = x + post2(mlp(x))          OLMo 2
    parallel  x = x + attn(norm1(x)) + mlp(norm2(x))   (one shared norm: Phi) GPT-NeoX

Shape legend: B batch, T positions, C model width, H heads, S key positions.
"""

from __future__ import annotations

from torch import nn

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.deberta import DisentangledAttention
from attnviz.transformer.deepseek_moe import DeepSeekMoE
from attnviz.transformer.layers import MLP, GatedMLP, MixtureOfExperts, make_norm
from attnviz.transformer.mla import LatentAttention
from attnviz.transformer.record import NOTHING


def make_attention(config: ModelConfig) -> nn.Module:
    c = config
    if c.pos_att_type:  # DeBERTa: content and relative-position terms in one score
        return DisentangledAttention(c)
    if c.kv_lora_rank is not None:  # DeepSeek's multi-head latent attention
        return LatentAttention(c.d_model, c.n_heads, c.kv_lora_rank, c.dim_per_head - c.qk_rope_head_dim,
                               c.qk_rope_head_dim, c.value_dim, c.q_lora_rank, bias=c.out_bias, scale=c.attn_scale)
    return MultiHeadAttention(
        c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, qkv_bias=c.qkv_bias, out_bias=c.out_bias,
        scale=c.attn_scale, softcap=c.attn_softcap, qk_norm=c.qk_norm, norm=c.norm, norm_eps=c.norm_eps,
        sinks=c.attn_sinks,
    )


def make_mlp(config: ModelConfig, layer: int = 0) -> nn.Module:
    c = config
    if c.router in ("softmax_group", "sigmoid_group") and layer >= c.dense_layers:  # DeepSeekMoE
        return DeepSeekMoE(c.d_model, c.moe_d_ff or c.d_ff, c.n_experts, c.experts_per_token, c.router,
                           c.n_shared_experts, c.n_group, c.topk_group, c.routed_scaling_factor, c.norm_topk_prob,
                           c.activation)
    if c.n_experts is not None and c.router not in ("softmax_group", "sigmoid_group"):
        return MixtureOfExperts(c.d_model, c.d_ff, c.n_experts, c.experts_per_token, c.activation, c.router,
                                c.expert_glu, c.glu_limit, bias=c.mlp_bias)
    mlp = GatedMLP if c.gated_mlp else MLP
    return mlp(c.d_model, c.d_ff, c.activation, bias=c.mlp_bias)


class Block(nn.Module):
    """Attention and MLP, each with a residual, with norms placed as `config.norm_placement` says."""

    def __init__(self, config: ModelConfig, layer: int = 0) -> None:
        """layer: which block this is (DeepSeek's first layers have a dense MLP, the others experts)."""
        super().__init__()
        c = config
        self.placement, self.residual = c.norm_placement, c.residual
        self.pre_norm = c.pre_norm
        self.attn = make_attention(c)
        self.mlp = make_mlp(c, layer)
        # attn_norm/mlp_norm: the norms before (pre, sandwich, parallel) or after (post) each sublayer's
        # residual; attn_post_norm/mlp_post_norm: on each sublayer's output (sandwich, after).
        self.attn_norm = make_norm(c.norm, c.d_model, c.norm_eps) if c.norm_placement != "after" else None
        shared = c.residual == "parallel_shared"
        self.mlp_norm = (make_norm(c.norm, c.d_model, c.norm_eps)
                         if c.norm_placement != "after" and not shared else None)
        posts = c.norm_placement in ("sandwich", "after")
        self.attn_post_norm = make_norm(c.norm, c.d_model, c.norm_eps) if posts else None
        self.mlp_post_norm = make_norm(c.norm, c.d_model, c.norm_eps) if posts else None

    def forward(self, x, mask=None, rotary=None, head_mask=None, record=None, cache=None, bias=None):
        """x [B, T, C] -> (x [B, T, C], attn [B, H, T, S]); record and cache as in MultiHeadAttention,
        bias an additive score term (ALiBi), or DeBERTa's relative inputs (deberta.Relative). The record
        also sees the block's input and its sublayers' outputs (attnviz.transformer.record)."""
        record = NOTHING if record is None else record
        kwargs = {"rotary": rotary, "head_mask": head_mask, "record": record, "cache": cache, "bias": bias}
        x = record.edit("block_inputs", x)
        if self.residual != "sequential":  # GPT-NeoX, Phi: both sublayers read the same x
            h = self.attn_norm(x)
            out, attn = self._attention(h, mask, record, kwargs)
            mlp_in = h if self.mlp_norm is None else self.mlp_norm(x)
            return x + out + self._mlp(mlp_in, record), attn
        if self.placement == "post":  # BERT: norm(x + f(x)), "Attention Is All You Need" order
            out, attn = self._attention(x, mask, record, kwargs)
            x = self.attn_norm(x + out)
            return self.mlp_norm(x + self._mlp(x, record)), attn
        out, attn = self._attention(x if self.attn_norm is None else self.attn_norm(x), mask, record, kwargs)
        x = x + (out if self.attn_post_norm is None else self.attn_post_norm(out))
        out = self._mlp(x if self.mlp_norm is None else self.mlp_norm(x), record)
        return x + (out if self.mlp_post_norm is None else self.mlp_post_norm(out)), attn

    def _attention(self, x, mask, record, kwargs):
        out, attn = self.attn(x, mask, **kwargs)
        record.keep("attn_outputs", out)
        return out, attn

    def _mlp(self, x, record):
        return record.edit("mlp_outputs", self.mlp(x))
