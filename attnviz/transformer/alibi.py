"""ALiBi (Press et al. 2022, BLOOM): no position embeddings; each head adds slope_h * (key position) to
its scores. Under a causal softmax that equals -slope_h * (query - key): nearer keys weigh more, each
head with its own reach. Slopes and positions follow HF's `build_alibi_tensor`.
"""

from __future__ import annotations

import math

import torch


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """[H] float32: the geometric sequence 2^(-8/n), 2^(-16/n), ... for the nearest power of two n below
    n_heads, and for the heads beyond it the odd terms of the sequence for 2n."""
    closest = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, n_heads - closest)
        extra = torch.pow(extra_base, torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32))
        slopes = torch.cat([slopes, extra], dim=0)
    return slopes


def alibi_bias(slopes: torch.Tensor, batch: int, length: int, attention_mask=None, device=None) -> torch.Tensor:
    """[B, H, 1, S] additive scores: slope_h times each key's position among the real tokens."""
    mask = torch.ones(batch, length, dtype=torch.long, device=device) if attention_mask is None else attention_mask
    positions = ((mask.cumsum(dim=-1) - 1) * mask)[:, None, :]  # B, 1, S
    return (slopes.to(mask.device)[None, :, None] * positions)[:, :, None, :]  # B, H, 1, S
