"""DeepSeek's multi-head latent attention (MLA, DeepSeek-V2 2024; V3, Kimi K2, Moonlight), beside
`MultiHeadAttention` and through the same kernels (attention.ATTENTION_FUNCTIONS).

Each token's keys and values are rebuilt from one small latent c (kv_lora_rank wide, RMS-normed) that every
head shares, plus one rotary key k_R (qk_rope_head_dim wide) that every head shares too:

    [c ; k_R] = x W_DKV                      kv_a_proj_with_mqa, then kv_a_layernorm on c
    k_h = [c W_UK^h ; rope(k_R)]             kv_b_proj's key rows: the no-rope part, one per head
    v_h = c W_UV^h                           kv_b_proj's value rows (v_head_dim, may differ from the key width)
    q_h = [q_C^h ; rope(q_R^h)]              from q_proj, or the low-rank q_a_proj, q_a_layernorm, q_b_proj
    score = scale * (q_C^h . c W_UK^h + rope(q_R^h) . rope(k_R))

So every head keeps keys of its own (unlike GQA's shared ones), while a cache needs only [c ; k_R] per token:
kv_lora_rank + qk_rope_head_dim numbers, against MHA's 2 * H * D. Decoding with a cache uses the "absorbed"
form: W_UK^h moves into the query (q_C^h W_UK^h^T is kv_lora_rank wide), so the scores are an MQA over the
cached [c ; rope(k_R)] with one key head, and W_UV^h is applied to the latent context after the softmax.

The rotary part is split-half (rope.py); DeepSeek's checkpoints lay it out in interleaved pairs, which the
converter (attnviz.loading.converters.deepseek) permutes into halves in the query and key rows, leaving every
q.k unchanged. Shape legend: B batch, H heads, T query positions, S key positions, R kv_lora_rank, P
qk_rope_head_dim, N qk_nope_head_dim (D = N + P the query-key width), E v_head_dim, C d_model.
"""

from __future__ import annotations

import torch
from torch import nn

from attnviz.transformer.attention import ATTENTION_FUNCTIONS
from attnviz.transformer.layers import RMSNorm
from attnviz.transformer.record import NOTHING
from attnviz.transformer.rope import apply_rotary

LATENT_NORM_EPS = 1e-6  # HF builds q_a_layernorm and kv_a_layernorm with their default eps, not rms_norm_eps


class LatentAttention(nn.Module):
    """MLA of `n_heads` heads.

    >>> mla = LatentAttention(d_model=512, n_heads=8, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
    ...                       v_head_dim=64)
    >>> out, attn = mla(torch.randn(2, 10, 512))   # (2, 10, 512), (2, 8, 10, 10)
    """

    def __init__(self, d_model: int, n_heads: int, kv_lora_rank: int, qk_nope_head_dim: int, qk_rope_head_dim: int,
                 v_head_dim: int, q_lora_rank: int | None = None, bias: bool = False, *,
                 scale: float | None = None) -> None:
        """bias: on q_a_proj, kv_a_proj_with_mqa and o_proj (HF's attention_bias); scale: of q.k, default
        1/sqrt(N + P) (a YaRN checkpoint's mscale^2 times that: the converter's)."""
        super().__init__()
        self.n_heads = self.n_kv_heads = n_heads  # every head has keys of its own
        self.kv_lora_rank, self.nope, self.rope = kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim
        self.head_dim, self.v_head_dim = qk_nope_head_dim + qk_rope_head_dim, v_head_dim
        width = n_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, width, bias=False) if q_lora_rank is None else None
        self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=bias) if q_lora_rank is not None else None
        self.q_a_layernorm = RMSNorm(q_lora_rank, LATENT_NORM_EPS) if q_lora_rank is not None else None
        self.q_b_proj = nn.Linear(q_lora_rank, width, bias=False) if q_lora_rank is not None else None
        self.kv_a_proj_with_mqa = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias)
        self.kv_a_layernorm = RMSNorm(kv_lora_rank, LATENT_NORM_EPS)
        self.kv_b_proj = nn.Linear(kv_lora_rank, n_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.o_proj = nn.Linear(n_heads * v_head_dim, d_model, bias=bias)
        self.scale = self.head_dim**-0.5 if scale is None else scale
        self.softcap = self.sinks = self.qk_norm = None  # what Transformer.score_setup reads of any attention

    @property
    def kv_group(self) -> list[int]:
        return list(range(self.n_heads))

    def forward(self, x, mask=None, kv=None, rotary=None, head_mask=None, record=None, cache=None, bias=None):
        """As MultiHeadAttention.forward, self-attention only (kv must be None). cache: a `LayerCache` that
        holds each token's latent [B, 1, S, R] as its keys and rotary key [B, 1, S, P] as its values; with
        one, the scores are computed in the absorbed form. Returns (out [B, T, C], attn [B, H, T, S])."""
        if kv is not None:
            raise ValueError("latent attention is self-attention only")
        record = NOTHING if record is None else record
        b, t, _ = x.shape
        q = self.queries(x, rotary)  # B, H, T, D
        latent, k_rot = self.compress(x, rotary)  # B, 1, T, R; B, 1, T, P
        attend = ATTENTION_FUNCTIONS[record.kernel]  # "full" maps; "rows" for a Reducer's row blocks
        if cache is None:
            k, v = self.expand(latent, k_rot)  # B, H, S, D; B, H, S, E
            context, attn = attend(q, k, v, mask, self.scale, bias, None, None, record)  # B, H, T, E
        else:
            latent, k_rot = cache.append(latent, k_rot)  # every cached position's
            context, attn = self.absorbed(q, latent, k_rot, mask, bias, record, attend)  # B, H, T, E
            k = v = None
        if head_mask is not None:
            keep = head_mask.to(context.dtype)
            keep = keep[None, :, None, None] if keep.dim() == 1 else keep[:, :, None, None]  # B or 1, H, 1, 1
            context = context * keep
        context = record.edit("head_outputs", context)  # kept, or another run's put in its place (patching)
        self._record(record, q, k, v, latent, k_rot)
        context = context.transpose(1, 2).reshape(b, t, self.n_heads * self.v_head_dim)  # B, T, H*E
        return self.o_proj(context), attn

    def queries(self, x, rotary):
        """x [B, T, C] -> q [B, H, T, D]: the no-rope part, then the rotated rope part."""
        b, t, _ = x.shape
        q = self.q_proj(x) if self.q_proj is not None else self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # B, H, T, D
        if rotary is None:
            return q
        q_pass, q_rot = q.split((self.nope, self.rope), dim=-1)
        return torch.cat((q_pass, apply_rotary(q_rot, *rotary)), dim=-1)

    def compress(self, x, rotary):
        """x [B, T, C] -> (the normed latent [B, 1, T, R], the rotated shared key [B, 1, T, P]): what a cache keeps."""
        b, t, _ = x.shape
        latent, k_rot = self.kv_a_proj_with_mqa(x).split((self.kv_lora_rank, self.rope), dim=-1)
        latent = self.kv_a_layernorm(latent).view(b, 1, t, self.kv_lora_rank)
        k_rot = k_rot.view(b, 1, t, self.rope)
        return latent, k_rot if rotary is None else apply_rotary(k_rot, *rotary)

    def expand(self, latent, k_rot):
        """The latent [B, 1, S, R] and shared key [B, 1, S, P] -> each head's keys [B, H, S, D] and values
        [B, H, S, E] (kv_b_proj: the no-rope key and the value per head; the rotary key repeated)."""
        b, _, s, _ = latent.shape
        kv = self.kv_b_proj(latent[:, 0]).view(b, s, self.n_heads, self.nope + self.v_head_dim).transpose(1, 2)
        k_pass, v = kv.split((self.nope, self.v_head_dim), dim=-1)  # B, H, S, N; B, H, S, E
        k = torch.cat((k_pass, k_rot.expand(b, self.n_heads, s, self.rope)), dim=-1)  # B, H, S, D
        return k, v

    def absorbed(self, q, latent, k_rot, mask, bias, record, attend):
        """Attention straight from the cache: q_C^h W_UK^h . c + q_R^h . k_R, an MQA over [c ; k_R] with one
        key head whose values are the latents, then W_UV^h on each head's latent context."""
        weight = self.kv_b_proj.weight.view(self.n_heads, self.nope + self.v_head_dim, self.kv_lora_rank)
        w_uk, w_uv = weight.split((self.nope, self.v_head_dim), dim=1)  # H, N, R; H, E, R
        q_pass, q_rot = q.split((self.nope, self.rope), dim=-1)
        q_latent = torch.matmul(q_pass, w_uk)  # B, H, T, R
        keys = torch.cat((latent, k_rot), dim=-1)  # B, 1, S, R + P
        context, attn = attend(torch.cat((q_latent, q_rot), dim=-1), keys, latent, mask, self.scale, bias, None,
                               None, record)  # B, H, T, R
        return torch.matmul(context, w_uv.transpose(1, 2)), attn  # B, H, T, E

    def _record(self, record, q, k, v, latent, k_rot) -> None:
        """Queries, keys and values as the full form multiplies them (rebuilt from the cache when decoding,
        only if asked for), and value norms."""
        record.keep("queries", q)
        if k is None and any(record.wants(name) for name in ("keys", "values", "value_norms")):
            k, v = self.expand(latent, k_rot)
        if k is None:
            return
        record.keep("keys", k)
        record.keep("values", v)
        if record.wants("value_norms"):
            record.keep("value_norms", self.value_norms(v))

    def value_norms(self, v):
        """||v_h W_O^h|| [B, H, S] from the values [B, H, S, E] (as MultiHeadAttention.value_norms)."""
        w_o = self.o_proj.weight.view(-1, self.n_heads, self.v_head_dim)  # C, H, E
        return torch.einsum("bhse,che->bhsc", v, w_o).float().norm(dim=-1)  # B, H, S
