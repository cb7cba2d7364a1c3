"""Rotary position embedding, split-half form as in HF Llama (`rotate_half`), cos/sin in float32.

The scaled variants follow HF's modeling_rope_utils arithmetic, so the angles agree to the last bit:
linear (positions divided by a factor), llama3 (frequency-dependent), yarn (gpt-oss: interpolation ramp
plus an attention factor on cos/sin) and longrope (Phi-3: per-dimension factors, the long set beyond
the original context). Partial rotary (Pythia, Phi) rotates the first rotary_dim dims of each head.
"""

from __future__ import annotations

import math

import torch

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn", "longrope")


def inverse_frequencies(head_dim: int, theta: float, scaling: dict | None = None, seq_len: int = 0) -> torch.Tensor:
    """[D/2] float32 inverse frequencies; `scaling` is HF's `rope_parameters` dict (or None); `head_dim`
    is the rotated width (rotary_dim for partial rotary). `seq_len` matters to longrope only."""
    return rope_frequencies(head_dim, theta, scaling, seq_len)[0]


def rope_frequencies(head_dim: int, theta: float, scaling: dict | None = None, seq_len: int = 0):
    """(inverse frequencies [D/2] float32, attention factor that multiplies cos and sin)."""
    # Same arithmetic as HF's _compute_default_rope_parameters, so the angles agree to the last bit.
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float) / head_dim
    inv_freq = 1.0 / (theta**exponents)
    p = scaling or {}
    rope_type = p.get("rope_type", "default")
    if rope_type == "default":
        return inv_freq, 1.0
    if rope_type == "linear":
        return inv_freq / p["factor"], 1.0
    if rope_type == "llama3":
        return _llama3_frequencies(inv_freq, p), 1.0
    if rope_type == "yarn":
        return _yarn_frequencies(head_dim, theta, p)
    if rope_type == "longrope":
        return _longrope_frequencies(exponents, theta, p, seq_len)
    raise ValueError(
        f"rope_type {rope_type!r} is not implemented; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
    )


def _yarn_frequencies(dim: int, base: float, p: dict):
    # HF _compute_yarn_parameters (YaRN, Peng et al. 2023): interpolate low frequencies, keep high ones.
    factor, original = p["factor"], p["original_max_position_embeddings"]

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        if p.get("mscale") and p.get("mscale_all_dim"):
            attention_factor = float(mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"]))
        else:
            attention_factor = mscale(factor)
    beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # HF: prevents a division by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # share of each frequency left unscaled
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


def _longrope_frequencies(exponents: torch.Tensor, base: float, p: dict, seq_len: int):
    # HF _compute_longrope_parameters: the long factors once the text outgrows the original context.
    original = p["original_max_position_embeddings"]
    factor = p.get("factor") or p["max_position_embeddings"] / original
    attention_factor = p.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    factors = p["long_factor"] if seq_len > original else p["short_factor"]
    return 1.0 / (torch.tensor(factors, dtype=torch.float32) * base**exponents), attention_factor


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


def rotary_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype, factor: float = 1.0):
    """cos, sin of shape [B, T, D] for integer positions [B, T] (D: the rotated width), times the
    scaling's attention factor (YaRN, longrope; 1 otherwise)."""
    freqs = positions[..., None].float() * inv_freq.float().to(positions.device)  # B, T, D/2
    angles = torch.cat((freqs, freqs), dim=-1)  # B, T, D
    if factor == 1.0:
        return angles.cos().to(dtype), angles.sin().to(dtype)
    return (angles.cos() * factor).to(dtype), (angles.sin() * factor).to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, H, T, D] by the angles of cos/sin [B, T, R]: all of each head when R = D, else its
    first R dims, the rest passed through (partial rotary: GPT-NeoX's rotary_pct, Phi's partial factor)."""
    cos, sin = cos[:, None], sin[:, None]  # B, 1, T, R
    rotated = cos.shape[-1]
    if rotated == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    x_rot, x_pass = x[..., :rotated], x[..., rotated:]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)
