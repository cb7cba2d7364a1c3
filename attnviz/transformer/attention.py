"""Multi-head attention from scratch: MHA, MQA and GQA from one class, self- or cross-attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(D) + mask) V,    head_i = Attention(X Wq_i, X Wk_g(i), X Wv_g(i))

Shape legend: B batch, H query heads, K key/value heads, T query positions, S key positions,
D head dim, C model width (d_model). Query head h reads KV head g(h) = h // (H // K), the order of
HF's `repeat_kv`, so K = H is MHA, K = 1 is MQA and anything between is GQA. The kernel reads each
shared KV head once for its group of query heads (a grouped matmul), without repeating it.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import torch
from torch import nn

from attnviz.memory.ceiling import spending
from attnviz.transformer.layers import make_norm
from attnviz.transformer.masks import additive
from attnviz.transformer.record import NOTHING
from attnviz.transformer.rope import apply_rotary


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, K, S, D] -> [B, K * n_rep, S, D], each KV head repeated for the query heads that read it."""
    if n_rep == 1:
        return x
    b, k, s, d = x.shape
    return x[:, :, None].expand(b, k, n_rep, s, d).reshape(b, k * n_rep, s, d)  # B, H, S, D


def attention_scores(q, k, scale=None, bias=None, softcap=None, mask=None):
    """scale * q.k (+ bias), soft-capped (cap * tanh(s / cap)), + the mask's -inf: [B, H, T, S].

    q [B, H, T, D]; k [B, K, S, D] with K dividing H. For GQA (1 < K < H) the n_rep = H / K query heads of a
    group are stacked into one [n_rep * T, D] matrix per KV head and multiplied with that head's keys in one
    batched matmul: no [B, H, S, D] copy of the keys (`repeat_kv`, HF eager's way), whose memory traffic
    made GQA's decoding steps as slow as MHA's. MHA (K = H) needs no stacking, and MQA's one KV head is
    broadcast by matmul (as fast or faster than stacking: benchmarks/bench_forward.py). `mask` is a
    keep-mask broadcastable to [B, H, T, S] (True = may attend); `bias` an additive term broadcastable to it
    (ALiBi's slopes, T5's position buckets, DeBERTa's position terms)."""
    b, h, t, d = q.shape
    groups = k.shape[1]
    # (Q * scale) K^T touches T x D values instead of T x S; with a power-of-two scale (D = 64, 16)
    # the result is bit-identical to scaling the scores.
    scaled = q * (d ** -0.5 if scale is None else scale)
    if 1 < groups < h:
        scaled = scaled.reshape(b, groups, (h // groups) * t, d)  # B, K, n_rep*T, D
    scores = torch.matmul(scaled, k.transpose(-2, -1)).view(b, h, t, -1)  # B, H, T, S
    if bias is not None:
        scores = scores + bias
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        scores = scores + additive(mask, scores.dtype)
    return scores


def attention_softmax(scores, sinks=None, dtype=None, out=None):
    """Each row's softmax [B, H, T, S], in float32 and cast back to `dtype` (as HF's eager attention), written
    into `out` when given. `sinks` [H] are learned logits that join each row's denominator and are dropped
    after it (gpt-oss), so a row then sums to less than 1."""
    dtype = scores.dtype if dtype is None else dtype
    if sinks is not None:
        b, h, t, _ = scores.shape
        column = sinks.to(scores.dtype).reshape(1, h, 1, 1).expand(b, h, t, 1)
        combined = torch.cat((scores, column), dim=-1)  # B, H, T, S + 1
        combined = combined - combined.amax(dim=-1, keepdim=True)  # as HF: no overflow in bf16
        probs = torch.softmax(combined, dim=-1, dtype=torch.float32)[..., :-1].to(dtype)
    elif out is not None and out.dtype == torch.float32 == scores.dtype:
        return torch.softmax(scores, dim=-1, out=out)
    else:
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(dtype)
    return probs if out is None else out.copy_(probs)


def attention_context(probs, v):
    """probabilities [B, H, T, S] times values v [B, K, S, D] -> context [B, H, T, D], GQA's query heads
    stacked per KV head as in `attention_scores`."""
    b, h, t, s = probs.shape
    groups = v.shape[1]
    if 1 < groups < h:
        return torch.matmul(probs.reshape(b, groups, -1, s), v).view(b, h, t, -1)  # B, K, n_rep*T, D -> B, H, T, D
    return torch.matmul(probs, v)  # B, H, T, D


# A causal map of more query rows than this is computed FULL_BLOCK_ROWS rows at a time over the keys each block
# may see, its blocked cells written as zeros: the scores, softmax and context of the upper triangle are never
# computed (at 512 tokens 5/8 of them are; benchmarks/bench_peers.py's forward rows).
FULL_BLOCK_ROWS = 128


def full_maps(q, k, v, mask, scale, bias, softcap, sinks, record):
    """The whole [B, H, T, S] map. Returns (context [B, H, T, D], probabilities [B, H, T, S]); the record gives
    the buffer the probabilities are written into (or None: a new tensor). Where the mask hides whole blocks of
    keys (causal, sliding window) and the record does not keep the scores, the map is made in blocks of rows
    (`masked_blocks`); else at once, the record handed the scores."""
    b, h, t, _ = q.shape
    s = k.shape[2]
    plans = None if record.wants("scores") else masked_blocks(mask, t, s)
    with spending(map_bytes(q, s, t), "the attention maps"):
        if plans is None:
            scores = attention_scores(q, k, scale, bias, softcap, mask)  # B, H, T, S
            record.keep("scores", scores)
            probs = attention_softmax(scores, sinks, q.dtype, out=record.probabilities_buffer((b, h, t, s), q))
            return attention_context(probs, v), probs  # B, H, T, D; B, H, T, S
        probs = record.probabilities_buffer((b, h, t, s), q)
        probs = q.new_empty(b, h, t, s) if probs is None else probs  # B, H, T, S
        context = q.new_empty(b, h, t, v.shape[-1])  # B, H, T, D
        for plan in plans:
            r0, r1, c0, c1 = plan.r0, plan.r1, plan.c0, plan.c1
            scores = block_scores(q, k, scale, bias, softcap, plan)  # B, H, R, C
            rows = probs[:, :, r0:r1]  # B, H, R, S: the keys outside c0:c1 get probability 0, as HF's softmax gives
            rows[..., :c0].zero_()
            rows[..., c1:].zero_()
            block = attention_softmax(scores, sinks, q.dtype, out=rows[..., c0:c1])
            context[:, :, r0:r1] = attention_context(block, v[:, :, c0:c1])
        return context, probs


def masked_blocks(mask, t: int, s: int) -> list[BlockPlan] | None:
    """`full_maps`' blocks of FULL_BLOCK_ROWS rows where the mask hides whole blocks of keys from some of them
    (a causal map longer than one block, a sliding window); None where every block sees every key."""
    if mask is None or t <= FULL_BLOCK_ROWS:
        return None
    plans = block_plans(mask, t, s, FULL_BLOCK_ROWS)
    return None if all(plan.c0 == 0 and plan.c1 == s for plan in plans) else plans


def map_bytes(q, s: int, rows: int) -> int:
    """The transient of `rows` query rows' maps over `s` keys (q [B, H, T, D]), where the kernel allocates it
    (attnviz.memory.ceiling): the scores, their sum with the mask or bias (a new tensor while the scores still
    live), the probabilities in q's dtype, and the softmax's float32 result where that dtype is another."""
    b, h = q.shape[:2]
    cells = b * h * rows * s
    return cells * (3 * q.element_size() + (4 if q.dtype != torch.float32 else 0))


def visible_columns(mask, r0: int, r1: int, s: int) -> tuple[int, int]:
    """The columns [c0, c1) that rows r0:r1 of a keep-mask may see: a causal block sees no key after its last
    row, a sliding window none before its first row's window. All S columns when a row of the block sees
    nothing (HF's rule gives such a row a uniform softmax over every key)."""
    if mask is None:
        return 0, s
    block = mask if mask.shape[-2] == 1 else mask[..., r0:r1, :]
    block = block.reshape(-1, block.shape[-2], block.shape[-1])
    if not bool(block.any(-1).all()):
        return 0, s
    seen = torch.nonzero(block.any(-2).any(0)).flatten()
    return int(seen[0]), int(seen[-1]) + 1


def _block(tensor, r0: int, r1: int, c0: int, c1: int):
    """Rows r0:r1 and columns c0:c1 of a mask or bias broadcastable to [B, H, T, S] (a size-1 row axis stays)."""
    if tensor is None:
        return None
    rows = tensor if tensor.shape[-2] == 1 else tensor[..., r0:r1, :]
    return rows[..., c0:c1]


# A block's probabilities are read several times after the softmax (the context, a Reducer's reductions): blocks
# of at most this many bytes stay in a server's cache between those reads, while each block's fixed cost in calls
# is spread over enough rows (SmolLM2 at 3,700 tokens: 64 rows, 5.0 ns a probability reduced, 8.8 at 256 rows).
BLOCK_BYTES = 16 * 2**20
MIN_BLOCK_ROWS = 32


def block_rows(rows: int, heads: int, keys: int) -> int:
    """The query rows of a block: `rows` (the record's), fewer where [heads, rows, keys] float32 would pass
    BLOCK_BYTES, a power of two and never under MIN_BLOCK_ROWS (each block has a fixed cost in calls)."""
    fit = BLOCK_BYTES // (4 * heads * max(keys, 1))
    return min(rows, max(MIN_BLOCK_ROWS, 1 << max(fit, 1).bit_length() - 1))


class BlockPlan(NamedTuple):
    """One block of `row_blocks`: rows r0:r1 over columns c0:c1, and where the mask blocks some of them: the
    columns m0:m1 (absolute) and their blocked entries (True = blocked, broadcastable to [B, H, R, m1 - m0]),
    or None when the block's rows may see every one of its columns."""

    r0: int
    r1: int
    c0: int
    c1: int
    m0: int
    blocked: torch.Tensor | None


# id(mask) -> {(T, S, rows): [BlockPlan]}, dropped with the mask (a WeakKeyDictionary would compare tensors with ==)
_PLANS: dict[int, dict] = {}


def block_plans(mask, t: int, s: int, rows: int) -> list[BlockPlan]:
    """The blocks of rows a layer with this keep-mask is computed in. The model makes one mask per kind of
    layer for a forward pass (Transformer.layer_inputs), so the plan is made once per kind, not once a layer."""
    made = _PLANS.get(id(mask)) if mask is not None else None
    if made is not None and (t, s, rows) in made:
        return made[(t, s, rows)]
    plans = []
    for r0 in range(0, t, rows):
        r1 = min(r0 + rows, t)
        c0, c1 = visible_columns(mask, r0, r1, s)
        block = _block(mask, r0, r1, c0, c1)
        blocked, m0 = None, c0
        if block is not None:
            partly = torch.nonzero(~block.reshape(-1, block.shape[-1]).all(0)).flatten()  # columns some row misses
            if partly.numel():
                m0, m1 = int(partly[0]) + c0, int(partly[-1]) + c0 + 1
                blocked = ~block[..., m0 - c0 : m1 - c0]
        plans.append(BlockPlan(r0, r1, c0, c1, m0, blocked))
    if mask is not None:
        if id(mask) not in _PLANS:
            weakref.finalize(mask, _PLANS.pop, id(mask), None)
        _PLANS.setdefault(id(mask), {})[(t, s, rows)] = plans
    return plans


def block_scores(q, k, scale, bias, softcap, plan: BlockPlan) -> torch.Tensor:
    """One block's scores [B, H, R, C] (rows plan.r0:r1 over columns plan.c0:c1), the cells the mask blocks set
    to finfo.min in place, as the blocked scores HF's additive mask gives (a score plus finfo.min rounds to it)."""
    r0, r1, c0, c1, m0, blocked = plan
    scores = attention_scores(q[:, :, r0:r1], k[:, :, c0:c1], scale, _block(bias, r0, r1, c0, c1), softcap)
    if blocked is not None:
        scores[..., m0 - c0 : m0 - c0 + blocked.shape[-1]].masked_fill_(blocked, torch.finfo(scores.dtype).min)
    return scores


def row_blocks(q, k, v, mask, scale, bias, softcap, sinks, record):
    """The same scores, softmax and context as `full_maps` (up to rounding), blocks of query rows at a time
    (`block_rows` of `record.rows`) over the keys that block may see (`visible_columns`): a transient
    [B, H, rows, C] instead of [B, H, T, S], and the causal upper triangle never computed. The mask is put in
    only where a block has blocked entries (the diagonal part of a causal block), as the blocked scores HF's
    additive mask gives (finfo.min; a score plus finfo.min rounds to it). Each block's probabilities, with its
    scores (which the record may overwrite), go to `record.reduce(probabilities, r0, c0, scores)`
    (attnviz.transformer.reducer) and are not kept: returns (context [B, H, T, D], None)."""
    b, h, t, _ = q.shape
    s = k.shape[2]
    context = q.new_empty(b, h, t, v.shape[-1])  # B, H, T, D
    rows = block_rows(record.rows, h, s)
    with spending(map_bytes(q, s, rows), "the attention maps"):  # one block's at a time
        for plan in block_plans(mask, t, s, rows):
            r0, r1, c0, c1 = plan.r0, plan.r1, plan.c0, plan.c1
            scores = block_scores(q, k, scale, bias, softcap, plan)  # B, H, R, C
            probs = attention_softmax(scores, sinks, q.dtype)  # B, H, R, C
            record.reduce(probs, r0, c0, scores)
            context[:, :, r0:r1] = attention_context(probs, v[:, :, c0:c1])  # B, H, R, D
    return context, None


# The attention implementations by name; a record names the one it needs (`record.kernel`): a `Recorder`'s
# "full" maps, a `Reducer`'s "rows". Each takes (q, k, v, mask, scale, bias, softcap, sinks, record).
ATTENTION_FUNCTIONS = {"full": full_maps, "rows": row_blocks}


def scaled_dot_product_attention(q, k, v, mask=None, scale=None, record=None, bias=None, softcap=None, sinks=None):
    """The kernel the record names (ATTENTION_FUNCTIONS; "full" without a record): returns (context
    [B, H, T, D], probabilities [B, H, T, S], or None when a `Reducer` took them block by block).

        scores = scale * q.k (+ bias);  scores = cap * tanh(scores / cap) if softcap;  + mask;  softmax

    q [B, H, T, D]; k, v [B, K, S, D] with K dividing H: query head h reads KV head h // (H / K). scale:
    of q.k (default 1/sqrt(D)); mask, bias: as in `attention_scores`; sinks: as in `attention_softmax`.
    The result differs from HF eager only by rounding."""
    record = NOTHING if record is None else record
    return ATTENTION_FUNCTIONS[record.kernel](q, k, v, mask, scale, bias, softcap, sinks, record)


class MultiHeadAttention(nn.Module):
    """MHA (n_kv_heads=None), MQA (n_kv_heads=1) or GQA (1 < n_kv_heads < n_heads).

    >>> mha = MultiHeadAttention(d_model=512, n_heads=8)
    >>> out, attn = mha(torch.randn(2, 10, 512))   # (2, 10, 512), (2, 8, 10, 10)
    """

    def __init__(
        self,
        d_model: int = 512,
        n_heads: int = 8,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        qkv_bias: bool = True,
        out_bias: bool = True,
        *,
        scale: float | None = None,
        softcap: float | None = None,
        qk_norm: str | None = None,
        norm: str = "rmsnorm",
        norm_eps: float = 1e-6,
        sinks: bool = False,
    ) -> None:
        """scale: of q.k (default 1/sqrt(head_dim)); softcap: Gemma 2's cap * tanh(s / cap) on the scores;
        qk_norm "head" (a `norm` over each head's D: Qwen3, Gemma 3, Phi) or "projection" (over all heads'
        H*D: OLMo 2) on queries and keys before rotary; sinks: one learned logit per head in the softmax's
        denominator (gpt-oss)."""
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        if head_dim is None:
            if d_model % n_heads:
                raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
            head_dim = d_model // n_heads
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=out_bias)
        self.scale, self.softcap, self.qk_norm = scale, softcap, qk_norm
        self.q_norm = self.k_norm = None
        if qk_norm is not None:
            width = head_dim if qk_norm == "head" else None
            self.q_norm = make_norm(norm, width or n_heads * head_dim, norm_eps)
            self.k_norm = make_norm(norm, width or n_kv_heads * head_dim, norm_eps)
        self.sinks = nn.Parameter(torch.zeros(n_heads)) if sinks else None

    @property
    def kv_group(self) -> list[int]:
        """The KV head each query head reads."""
        return [h // (self.n_heads // self.n_kv_heads) for h in range(self.n_heads)]

    def forward(self, x, mask=None, kv=None, rotary=None, head_mask=None, record=None, cache=None, bias=None):
        """x [B, T, C]; kv [B, S, C] for cross-attention (default: x); mask: keep-mask for [B, H, T, S];
        rotary: (cos, sin) [B, T, D] (self-attention); head_mask [H], or [B, H] for one mask per batch row
        (an importance scan switches a different head off in each row): 1 keeps a head's output, 0 zeroes it;
        record: a `LayerRecord` (attnviz.transformer.record) that keeps what the caller asked for;
        cache: a `LayerCache` (attnviz.transformer.kv_cache). Self-attention appends this call's keys and values
        to it and attends over all of them; cross-attention (kv given) fills it on the first call and
        reuses it after, without projecting kv again. bias: an additive score term for [B, H, T, S].
        Returns (out [B, T, C], attn [B, H, T, S])."""
        record = NOTHING if record is None else record
        b, t, _ = x.shape
        q = self._normed(self.q_proj(x), self.q_norm, self.n_heads)  # B, H, T, D
        if cache is not None and kv is not None and cache.length:
            k, v = cache.keys, cache.values  # cross-attention: the encoder's, projected once
        else:
            k, v = self.project_kv(x if kv is None else kv)  # B, K, S, D each
            if rotary is not None:
                k = apply_rotary(k, *rotary)
            if cache is not None:
                k, v = cache.append(k, v)
        if rotary is not None:
            q = apply_rotary(q, *rotary)
        bias, terms = self.score_bias(q, k, bias)
        attend = ATTENTION_FUNCTIONS[record.kernel]  # "full" maps; "rows" for a Reducer's row blocks
        context, attn = attend(q, k, v, mask, self.scale, bias, self.softcap, self.sinks, record)  # B, H, T, D
        if head_mask is not None:
            keep = head_mask.to(context.dtype)
            keep = keep[None, :, None, None] if keep.dim() == 1 else keep[:, :, None, None]  # B or 1, H, 1, 1
            context = context * keep  # B, H, T, D
        context = record.edit("head_outputs", context)  # kept, or another run's put in its place (patching)
        self._record(record, q, k, v, terms)
        context = context.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)  # B, T, H*D
        return self.o_proj(context), attn

    def score_bias(self, q, k, bias):
        """(the additive score term the kernel adds to scale * q.k, its named parts or None): here the caller's
        `bias` as it is (ALiBi's, T5's), without parts. DeBERTa's attention makes its position terms here."""
        return bias, None

    def _record(self, record, q, k, v, terms) -> None:
        """All the record keeps of a layer's attention but what only the kernel sees (its scores, and its
        probabilities, whole or a block at a time) and the head outputs (an edit point, in `forward`):
        queries, keys, values, value norms and, where the score has named parts (`score_bias`), "score_terms"
        [B, 1 + N, H, T, S]: scale * q.k, then each part (zeros where it is None)."""
        record.keep("queries", q)
        record.keep("keys", k)
        record.keep("values", v)
        if record.wants("value_norms"):
            record.keep("value_norms", self.value_norms(v))
        if terms is not None and record.wants("score_terms"):
            content = attention_scores(q, k, self.scale)  # B, H, T, S
            parts = [content] + [torch.zeros_like(content) if part is None else part for part in terms.values()]
            record.keep("score_terms", torch.stack(parts, dim=1))

    def project_kv(self, kv):
        """kv [B, S, C] -> keys and values [B, K, S, D] (before rotary)."""
        b, s, _ = kv.shape
        k = self._normed(self.k_proj(kv), self.k_norm, self.n_kv_heads)  # B, K, S, D
        v = self.v_proj(kv).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)  # B, K, S, D
        return k, v

    def _normed(self, projected, norm, heads):
        """A projection [B, T, heads * D] -> [B, heads, T, D], through the q/k norm where the model has one:
        over the whole projection (OLMo 2) before the split into heads, or over each head (Qwen3) after."""
        b, t, _ = projected.shape
        if norm is not None and self.qk_norm == "projection":
            projected = norm(projected)
        x = projected.view(b, t, heads, self.head_dim)
        if norm is not None and self.qk_norm == "head":
            x = norm(x)
        return x.transpose(1, 2)

    def value_norms(self, v):
        """||f_h(x_j)|| [B, H, S] from values v [B, K, S, D]: each value vector mapped through its head's
        slice of the output projection, f_h(x) = (x W_V + b_V) W_O^h (Kobayashi et al. 2020; the output
        bias is left out, as it is the same for every token)."""
        v = repeat_kv(v, self.n_heads // self.n_kv_heads)  # B, H, S, D
        w_o = self.o_proj.weight.view(-1, self.n_heads, self.head_dim)  # C, H, D
        return torch.einsum("bhsd,chd->bhsc", v, w_o).float().norm(dim=-1)  # B, H, S
