"""A key/value cache for incremental decoding: each attention layer keeps the keys and values it has
already computed, so decoding token t+1 projects only that token instead of all t+1 again.

The cache holds keys and values per key/value head, [B, K, S, D], before `repeat_kv`: this is where
MQA (K = 1) and GQA (K = groups) save memory, 1/H and K/H of MHA's cache. New entries are appended
with `torch.cat`, as Hugging Face's DynamicCache does, so the tensors held are exactly the length
decoded and `nbytes` measures what the cache really holds. DeepSeek's latent attention
(attnviz.transformer.mla) keeps its latent [B, 1, S, kv_lora_rank] as `keys` and its shared rotary key
[B, 1, S, qk_rope_head_dim] as `values`: no per-head keys or values at all.
"""

from __future__ import annotations

import torch


class LayerCache:
    """One layer's keys and values [B, K, S, D]; for cross-attention, the encoder's, computed once."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add new positions; returns every position's keys and values so far."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat((self.keys, keys), dim=2)
            self.values = torch.cat((self.values, values), dim=2)
        return self.keys, self.values

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size()


class KVCache:
    """One LayerCache per layer (and, in an encoder-decoder, one more per layer for cross-attention)."""

    def __init__(self, n_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layers)]

    def __getitem__(self, layer: int) -> LayerCache:
        return self.layers[layer]

    @property
    def length(self) -> int:
        """Positions cached (those of layer 0; every self-attention layer holds as many)."""
        return self.layers[0].length

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    @property
    def numel(self) -> int:
        return sum(0 if c.keys is None else c.keys.numel() + c.values.numel() for c in self.layers)
