"""T5's relative position buckets (Raffel et al. 2020): no position embeddings; each head adds a learned
scalar b_h(bucket(j - i)) to its score of query i on key j. Small distances get a bucket each, larger ones
share logarithmically wider buckets up to `max_distance`, beyond which all distances share the last. The
encoder's buckets are bidirectional (half for keys before the query, half for keys after it); the
decoder's are causal (only keys at or before the query). Only the first layer of each stack holds the
table; the later layers reuse its bias. Buckets follow HF's `T5Attention._relative_position_bucket`.

Shape legend: H heads, T query positions, S key positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def relative_position_bucket(relative: torch.Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> torch.Tensor:
    """relative = key position - query position (long) -> bucket index in [0, num_buckets)."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).to(torch.long) * num_buckets  # keys after the query: the upper half
        distance = relative.abs()
    else:
        distance = -torch.clamp(relative, max=0)  # keys after the query are masked anyway: bucket 0
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # Distances from max_exact to max_distance spread over the remaining buckets on a log scale.
    large = max_exact + (torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """A [buckets, H] table of learned score offsets, T5's `relative_attention_bias`."""

    def __init__(self, n_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True) -> None:
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.embedding = nn.Embedding(num_buckets, n_heads)

    def buckets(self, query_length: int, key_length: int, past: int = 0, device=None) -> torch.Tensor:
        """[T, S] bucket of each (query, key) pair; queries sit at positions past .. past + T - 1 (a cached
        decoding step's query is at its real position, not at 0)."""
        query = torch.arange(past, past + query_length, dtype=torch.long, device=device)[:, None]
        key = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        return relative_position_bucket(key - query, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, query_length: int, key_length: int, past: int = 0) -> torch.Tensor:
        """[1, H, T, S] additive scores."""
        device = self.embedding.weight.device
        values = self.embedding(self.buckets(query_length, key_length, past, device))  # T, S, H
        return values.permute(2, 0, 1)[None]
