"""DeBERTa-v2/v3's disentangled attention (He et al. 2021), as HF's modeling_deberta_v2 computes it.

    score(i, j) = [ q_i . k_j  +  q_i . pk_d(i,j)  +  k_j . pq_d(i,j) ] / sqrt(D * (1 + number of terms))
                    content->content   content->position   position->content

d(i, j) = clamp(bucket(i - j) + span, 0, 2 * span - 1) indexes a table of 2 * span relative embeddings
shared by every layer (LayerNorm'd once when norm_rel_ebd says so); pk = the table through the layer's
key projection and pq through its query projection (share_att_key) or through their own pos_key/pos_query
projections. bucket() keeps distances below position_buckets / 2 exact and log-buckets the rest up to
max_relative_positions (make_log_bucket_position). The position terms enter the kernel as an additive
bias, so the recorded "scores" are the total pre-softmax score; "score_terms" records the three terms
apart ([B, 3, H, T, S]: c2c, c2p, p2c, in that order), which sum to it (plus the mask).

Shape legend: B batch, H heads, T query positions, S key positions (S = T: self-attention only),
D head dim, C model width, P = 2 * span relative embeddings.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.config import ModelConfig

TERMS = ("c2c", "c2p", "p2c")


def log_bucket_position(relative: torch.Tensor, bucket_size: int, max_position: int) -> torch.Tensor:
    """HF's make_log_bucket_position: distances within bucket_size // 2 kept, the rest log-bucketed."""
    sign = torch.sign(relative)
    mid = bucket_size // 2
    abs_pos = torch.where((relative < mid) & (relative > -mid), torch.tensor(mid - 1).type_as(relative),
                          torch.abs(relative))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid))
                         * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative.type_as(log_pos), log_pos * sign)


def relative_index(t: int, config: ModelConfig, device=None) -> torch.Tensor:
    """[T, T] rows of the relative embedding table each (query i, key j) pair reads: d(i, j) above."""
    position = torch.arange(t, dtype=torch.long, device=device)
    relative = position[:, None] - position[None, :]
    if config.position_buckets > 0 and config.max_relative_positions > 0:
        relative = log_bucket_position(relative, config.position_buckets, config.max_relative_positions)
    span = config.relative_span
    return torch.clamp(relative.long() + span, 0, 2 * span - 1)


class Relative(NamedTuple):
    """What every layer's disentangled attention reads, made once per forward pass (LayerInput.bias)."""

    embeddings: torch.Tensor  # P, C: the (normed) relative embedding table
    index: torch.Tensor  # T, T: d(i, j)


class RelativeEmbeddings(nn.Module):
    """The table shared by all layers (HF's encoder.rel_embeddings and encoder.LayerNorm)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(2 * config.relative_span, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps) if config.norm_rel_ebd else None

    def forward(self, t: int) -> Relative:
        table = self.embedding.weight
        table = table if self.norm is None else self.norm(table)
        return Relative(table, relative_index(t, self.config, table.device))


class DisentangledAttention(MultiHeadAttention):
    """MultiHeadAttention whose score adds DeBERTa's c2p and p2c terms; `bias` is the layer's `Relative`."""

    def __init__(self, config: ModelConfig) -> None:
        c = config
        self.terms = tuple(t for t in ("c2p", "p2c") if t in c.pos_att_type)
        scale = 1.0 / math.sqrt(c.dim_per_head * (1 + len(self.terms)))
        super().__init__(c.d_model, c.n_heads, None, c.head_dim, scale=scale)
        width = c.n_heads * self.head_dim
        self.share_att_key = c.share_att_key
        self.pos_key_proj = nn.Linear(c.d_model, width) if "c2p" in self.terms and not c.share_att_key else None
        self.pos_query_proj = nn.Linear(c.d_model, width) if "p2c" in self.terms and not c.share_att_key else None

    def _heads(self, projected: torch.Tensor) -> torch.Tensor:
        """[P, H*D] -> [H, P, D]."""
        return projected.view(projected.shape[0], self.n_heads, self.head_dim).transpose(0, 1)

    def position_terms(self, q, k, relative: Relative) -> dict[str, torch.Tensor]:
        """c2p and p2c [B, H, T, S] (already scaled) from q, k [B, H, T, D] and the relative table."""
        b, h, t, _ = q.shape
        index = relative.index  # T, S
        terms = {}
        if "c2p" in self.terms:
            proj = self.k_proj if self.share_att_key else self.pos_key_proj
            pos_key = self._heads(proj(relative.embeddings))  # H, P, D
            c2p = torch.matmul(q, pos_key.transpose(-1, -2))  # B, H, T, P
            terms["c2p"] = torch.gather(c2p, -1, index.expand(b, h, t, t)) * self.scale
        if "p2c" in self.terms:
            proj = self.q_proj if self.share_att_key else self.pos_query_proj
            pos_query = self._heads(proj(relative.embeddings))  # H, P, D
            p2c = torch.matmul(k, pos_query.transpose(-1, -2))  # B, H, S, P: key j against every distance
            terms["p2c"] = torch.gather(p2c, -1, index.T.expand(b, h, t, t)).transpose(-1, -2) * self.scale
        return terms

    def score_bias(self, q, k, relative):
        """(c2p + p2c, {"c2p": ..., "p2c": ...}) [B, H, T, S] from the layer's `Relative` (None where a term is
        off): the kernel adds their sum to c2c = scale * q.k, and "score_terms" records the three apart."""
        terms = self.position_terms(q, k, relative) if relative is not None else {}
        return (sum(terms.values()) if terms else None), {name: terms.get(name) for name in TERMS[1:]}

    def forward(self, x, mask=None, kv=None, rotary=None, head_mask=None, record=None, cache=None, bias=None):
        """As MultiHeadAttention.forward (self-attention, no cache); `bias` is the layer's `Relative`."""
        if kv is not None or cache is not None or rotary is not None:
            raise ValueError("DeBERTa's attention is self-attention without rotary or a cache")
        return super().forward(x, mask, head_mask=head_mask, record=record, bias=bias)
