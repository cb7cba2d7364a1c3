"""Rotary position embedding, split-half form as in HF Llama (`rotate_half`), cos/sin in float32."""

from __future__ import annotations

import math

import torch

SUPPORTED_ROPE_TYPES = ("default", "llama3")


def inverse_frequencies(head_dim: int, theta: float, scaling: dict | None = None) -> torch.Tensor:
    """[D/2] float32 inverse frequencies; `scaling` is HF's `rope_parameters` dict (or None)."""
    # Same arithmetic as HF's _compute_default_rope_parameters, so the angles agree to the last bit.
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float) / head_dim
    inv_freq = 1.0 / (theta**exponents)
    rope_type = (scaling or {}).get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    if rope_type == "llama3":
        return _llama3_frequencies(inv_freq, scaling)
    raise ValueError(
        f"rope_type {rope_type!r} is not implemented; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
    )


def _llama3_frequencies(inv_freq: torch.Tensor, p: dict) -> torch.Tensor:
    # Llama 3.1's frequency-dependent rescaling (HF _compute_llama3_parameters).
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old_context = p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rotary_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype):
    """cos, sin of shape [B, T, D] for integer positions [B, T]."""
    freqs = positions[..., None].float() * inv_freq.float().to(positions.device)  # B, T, D/2
    angles = torch.cat((freqs, freqs), dim=-1)  # B, T, D
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, H, T, D] by the angles of cos/sin [B, T, D]."""
    cos, sin = cos[:, None], sin[:, None]  # B, 1, T, D
    return x * cos + rotate_half(x) * sin
