"""Keep-masks (True = may attend) and their additive form.

Masks stay boolean until the last moment and are combined with `&`, so a position blocked twice
adds `finfo.min` once: adding it twice would overflow to -inf, and a fully blocked row of -inf
would give NaN after softmax. A fully blocked row of finite `finfo.min` gives a uniform row, as HF.
"""

from __future__ import annotations

import torch


def causal_mask(t: int, s: int | None = None, window: int | None = None, device=None) -> torch.Tensor:
    """Keep-mask [T, S]: query i sees keys j <= i (+ S - T for a prefix), within `window` if set."""
    s = t if s is None else s
    query = torch.arange(t, device=device)[:, None] + (s - t)
    key = torch.arange(s, device=device)[None, :]
    keep = key <= query
    if window is not None:
        keep &= key > query - window
    return keep


def band_mask(t: int, half: int, device=None) -> torch.Tensor:
    """Keep-mask [T, T] of a bidirectional local window: query i sees keys j with |i - j| <= half
    (ModernBERT's local layers, half = local_attention // 2)."""
    position = torch.arange(t, device=device)
    return (position[:, None] - position[None, :]).abs() <= half


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """HF's [B, S] 1/0 padding mask as a keep-mask broadcastable to (B, H, T, S)."""
    return attention_mask.bool()[:, None, None, :]


def additive(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where kept, finfo(dtype).min where blocked (finite, so a blocked row never turns NaN)."""
    zero = torch.zeros((), dtype=dtype, device=keep.device)
    blocked = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=keep.device)
    return torch.where(keep.bool(), zero, blocked)
