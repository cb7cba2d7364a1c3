"""The seed's import path, `from attnviz.attention import MultiHeadAttention`: the module itself lives in
attnviz/transformer/attention.py with the rest of the from-scratch transformer."""

from attnviz.transformer.attention import MultiHeadAttention, repeat_kv, scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "repeat_kv", "scaled_dot_product_attention"]
