"""KV cache bytes per token of MHA, GQA, MQA and DeepSeek's multi-head latent attention (MLA), measured.

One attention layer of each variant (MultiHeadAttention with K = H, g, 1 KV heads; LatentAttention) decodes
`n_tokens` random vectors one position at a time into a `KVCache`, and the bytes its tensors hold are divided
by the tokens: MHA, GQA and MQA keep keys and values, 2 * K * head_dim numbers a token; MLA keeps its latent
and its shared rotary key, kv_lora_rank + qk_rope_head_dim numbers a token, whatever the number of heads.
A model's figure is that layer's times its layers (every layer caches alike).

Sizes for a model that is not MLA follow DeepSeek's ratio (V2 and V3 both: 128 heads of 128 value and no-rope
dims, kv_lora_rank 512 = 4 x 128, qk_rope_head_dim 64 = 128 / 2): a latent of 4 head dims and a rotary key of
half a head dim. For the original Transformer (d_model 512, 8 heads of 64) that is a latent of 256 and a rotary
key of 32: 288 numbers a token, against MHA's 1,024, GQA's (2 groups) 256 and MQA's 128. MLA's saving grows
with the heads: at DeepSeek-V3's 128 heads, 576 numbers against MHA's 32,768 (1.8 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.mla import LatentAttention

ORIGINAL = {"d_model": 512, "n_heads": 8, "n_layers": 6}  # Vaswani et al. 2017, the base model
DECODED = 8  # tokens decoded per variant: what a cache holds grows by the same bytes every token
KINDS = ("MHA", "GQA", "MQA", "MLA")


@dataclass(frozen=True)
class LatentSizes:
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @classmethod
    def deepseek_ratio(cls, head_dim: int) -> LatentSizes:
        """DeepSeek-V2/V3's proportions for heads of `head_dim`: a latent of 4 head dims, a rotary key of half."""
        return cls(4 * head_dim, head_dim, max(2, head_dim // 2 // 2 * 2), head_dim)


@dataclass(frozen=True)
class CacheRow:
    kind: str  # MHA, GQA, MQA, MLA
    kv_heads: int  # key/value heads cached (MLA: 1 latent and 1 rotary key shared by every head)
    per_token: int  # numbers one token adds to one layer's cache
    bytes_per_token: int  # measured: one layer's cache bytes after decoding / tokens decoded
    model_bytes_per_token: int  # bytes_per_token times the layers


@dataclass(frozen=True)
class CacheSizes:
    d_model: int
    n_heads: int
    n_layers: int
    head_dim: int
    groups: int  # GQA's KV heads
    latent: LatentSizes
    dtype: str
    rows: list[CacheRow]


def default_groups(n_heads: int) -> int:
    """GQA's KV heads as the Learn page picks them: the fewest dividing the heads with 4 K >= H (2 of 8)."""
    grouped = [k for k in range(2, n_heads) if n_heads % k == 0 and 4 * k >= n_heads]
    return grouped[0] if grouped else n_heads


def sizes_of(config) -> dict:
    """`measure`'s sizes for a loaded model's ModelConfig: its width, heads, layers and head dim (an MLA model's
    value width), its own KV heads for GQA when it is GQA, its own latent when it is MLA."""
    mla = config.kv_lora_rank is not None
    latent = LatentSizes(config.kv_lora_rank, config.dim_per_head - config.qk_rope_head_dim, config.qk_rope_head_dim,
                         config.value_dim) if mla else None
    groups = config.kv_heads if config.attention_kind == "GQA" else None
    return {"d_model": config.d_model, "n_heads": config.n_heads, "n_layers": config.n_layers,
            "head_dim": config.value_dim, "groups": groups, "latent": latent}


def layer_of(kind: str, d_model: int, n_heads: int, head_dim: int, groups: int, latent: LatentSizes):
    if kind == "MLA":
        return LatentAttention(d_model, n_heads, latent.kv_lora_rank, latent.qk_nope_head_dim,
                               latent.qk_rope_head_dim, latent.v_head_dim)
    kv = {"MHA": n_heads, "GQA": groups, "MQA": 1}[kind]
    return MultiHeadAttention(d_model, n_heads, kv, head_dim)


@torch.inference_mode()
def measure(d_model: int, n_heads: int, n_layers: int, head_dim: int | None = None, groups: int | None = None,
            latent: LatentSizes | None = None, dtype=torch.float32, seed: int = 0) -> CacheSizes:
    """Each variant's cache bytes per token, from one layer's cache after decoding DECODED tokens (random
    inputs; no positions: neither changes what is stored), one layer built at a time."""
    head_dim = d_model // n_heads if head_dim is None else head_dim
    groups = default_groups(n_heads) if groups is None else groups
    latent = LatentSizes.deepseek_ratio(head_dim) if latent is None else latent
    inputs = torch.randn(1, DECODED, d_model, generator=torch.Generator().manual_seed(seed)).to(dtype)
    rows = []
    for kind in KINDS:
        torch.manual_seed(seed)
        layer = layer_of(kind, d_model, n_heads, head_dim, groups, latent).to(dtype).eval()
        cache = KVCache(1)
        for i in range(DECODED):
            layer(inputs[:, i:i + 1], cache=cache[0])
        held = cache.nbytes // DECODED
        per_token = cache.numel // DECODED
        kv_heads = 1 if kind == "MLA" else layer.n_kv_heads
        rows.append(CacheRow(kind, kv_heads, per_token, held, held * n_layers))
        del layer, cache
    return CacheSizes(d_model, n_heads, n_layers, head_dim, groups, latent, str(dtype).removeprefix("torch."), rows)


def peak_bytes(d_model: int, n_heads: int, head_dim: int | None = None, latent: LatentSizes | None = None,
               element: int = 4, **_) -> int:
    """An upper bound of what `measure` holds at once: the larger of one MHA layer and one MLA layer, plus the
    caches and inputs (small: DECODED tokens). Takes `sizes_of`'s keywords."""
    head_dim = d_model // n_heads if head_dim is None else head_dim
    latent = LatentSizes.deepseek_ratio(head_dim) if latent is None else latent
    qk = latent.qk_nope_head_dim + latent.qk_rope_head_dim
    mla = (d_model * n_heads * qk + d_model * (latent.kv_lora_rank + latent.qk_rope_head_dim)
           + latent.kv_lora_rank * n_heads * (latent.qk_nope_head_dim + latent.v_head_dim)
           + n_heads * latent.v_head_dim * d_model)
    mha = 4 * d_model * n_heads * head_dim + 4 * d_model
    cache = DECODED * (2 * n_heads * head_dim + latent.kv_lora_rank + latent.qk_rope_head_dim + d_model)
    return (max(mha, mla) + cache) * element
