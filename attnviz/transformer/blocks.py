"""Transformer blocks: post-norm (BERT family) and pre-norm (GPT-2, Llama family).

Shape legend: B batch, T positions, C model width, H heads, S key positions.
"""

from __future__ import annotations

from torch import nn

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.layers import MLP, GatedMLP, make_norm


class Block(nn.Module):
    """Attention and MLP, each with a residual; norms after (post-norm) or before (pre-norm) them."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = config.pre_norm
        self.attn = MultiHeadAttention(
            config.d_model,
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
            qkv_bias=config.qkv_bias,
            out_bias=config.out_bias,
        )
        self.attn_norm = make_norm(config.norm, config.d_model, config.norm_eps)
        mlp = GatedMLP if config.gated_mlp else MLP
        self.mlp = mlp(config.d_model, config.d_ff, config.activation, bias=config.mlp_bias)
        self.mlp_norm = make_norm(config.norm, config.d_model, config.norm_eps)

    def forward(self, x, mask=None, rotary=None, head_mask=None, record=None, cache=None):
        """x [B, T, C] -> (x [B, T, C], attn [B, H, T, S]); record and cache as in MultiHeadAttention."""
        kwargs = {"rotary": rotary, "head_mask": head_mask, "record": record, "cache": cache}
        if self.pre_norm:  # GPT-2, Llama: x + f(norm(x))
            out, attn = self.attn(self.attn_norm(x), mask, **kwargs)
            x = x + out
            return x + self.mlp(self.mlp_norm(x)), attn
        # BERT: norm(x + f(x)), "Attention Is All You Need" order
        out, attn = self.attn(x, mask, **kwargs)
        x = self.attn_norm(x + out)
        return self.mlp_norm(x + self.mlp(x)), attn
