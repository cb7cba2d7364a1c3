"""Why one key wins: the query-key view of one head and one query position (bertviz's neuron view).

The pre-softmax score of query i and key j is q_i . k_j / sqrt(D) = sum_d (q_i[d] * k_j[d]) / sqrt(D):
the per-dimension products, divided by sqrt(D), add up to the score, and the softmax of the scores over
the keys the query may see is the attention row. Splitting each sum into its positive and negative
parts shows whether a key wins by many small agreements or a few large ones, and what pulls it down.

Queries and keys are taken as the model multiplies them: after q/k norms and rotary, and for GQA/MQA the
key of query head h is KV head kv_group[h]. Where a model adds more to the score, the view adds it too
and keeps it apart: the head's ALiBi term slope_h * j (BLOOM); Gemma 2's soft-cap, cap * tanh(s / cap),
applied after the sum (`scores` are then the capped scores, `capped` says so); a layer's window (the
keys a query may see); gpt-oss's learned sink, a logit in the softmax's denominator with no key (the
probabilities then sum to 1 - `sink_share`); DeBERTa's position terms, content->position and
position->content (`terms`, recorded by the model: LoadedModel.score_terms), and T5's bucket bias
(LoadedSeq2Seq.score_terms), added to q.k as their sum in `bias` and kept by name in `terms`. DeepSeek's
latent attention (MLA) splits q.k itself: the first qk_nope_head_dim dimensions are the query against the key
rebuilt from the latent, the rest the rotary query against the rotary key every head shares (`parts`). Pure
numpy on arrays recorded by the caller.

Shapes: H query heads, K key/value heads, T query positions, S key positions, D head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QueryKeyView:
    head: int
    kv_head: int
    query_position: int
    query: np.ndarray  # [D] float64
    keys: np.ndarray  # [S, D] float64
    products: np.ndarray  # [S, D] q[d] * k_j[d] * scale: each key's row sums to its content score
    scores: np.ndarray  # [S] pre-softmax scores (NaN where the query may not look): content + bias, capped
    bias: np.ndarray  # [S] the score's position term (ALiBi's slope * j), 0 for most models
    positive: np.ndarray  # [S] sum of the positive products (/ sqrt(D))
    negative: np.ndarray  # [S] sum of the negative products (/ sqrt(D)), <= 0
    visible: np.ndarray  # [S] bool: the keys the query may attend to
    probabilities: np.ndarray  # [S] softmax of the visible scores, 0 elsewhere
    capped: bool = False  # scores went through a soft-cap
    sink_share: float = 0.0  # the weight the learned sink took (the probabilities sum to 1 - this)
    terms: dict | None = None  # name -> [S]: the position terms that make up `bias` (DeBERTa's c2p, p2c)
    parts: dict | None = None  # "no-rope", "rope" -> [S]: MLA's content score split at `rope_from` (they sum to it)

    @property
    def head_dim(self) -> int:
        return self.query.shape[0]


def query_key(queries, keys, kv_group: list[int], head: int, query: int, causal: bool = False,
              scale: float | None = None, window: int | None = None, softcap: float | None = None,
              slope: float | None = None, sink: float | None = None, terms: dict | None = None,
              rope_from: int | None = None) -> QueryKeyView:
    """The view for `head` and query position `query`, from one layer's queries [H, T, D] and keys
    [K, S, D]. `causal` hides keys after the query (aligned at the end when keys include a prefix);
    `window` hides keys beyond a sliding window (causal: the last `window` keys; otherwise keys more than
    window // 2 away, ModernBERT's band); `scale` defaults to 1 / sqrt(D), the kernel's; `slope` is the
    head's ALiBi slope, `softcap` the score cap, `sink` the head's learned sink logit, `terms` named [S]
    score terms of this query beside q.k (DeBERTa's c2p and p2c; see the module docstring). `rope_from`: where
    the rotary dimensions of each head start (MLA: after qk_nope_head_dim); the view then keeps the content
    score's two parts, the latent's no-rope term and the shared rotary key's term, in `parts`."""
    q_all, k_all = np.asarray(queries, dtype=np.float64), np.asarray(keys, dtype=np.float64)
    if q_all.ndim != 3 or k_all.ndim != 3 or q_all.shape[-1] != k_all.shape[-1]:
        raise ValueError(f"queries must be [H, T, D] and keys [K, S, D], got {q_all.shape} and {k_all.shape}")
    n_heads, n_queries, dim = q_all.shape
    if len(kv_group) != n_heads:
        raise ValueError(f"kv_group has {len(kv_group)} entries for {n_heads} query heads")
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} outside 0..{n_heads - 1}")
    if not 0 <= query < n_queries:
        raise ValueError(f"query position {query} outside 0..{n_queries - 1}")
    kv_head = int(kv_group[head])
    if not 0 <= kv_head < k_all.shape[0]:
        raise ValueError(f"kv_group[{head}] = {kv_head}, but there are {k_all.shape[0]} key heads")
    scale = dim**-0.5 if scale is None else scale
    q, k = q_all[head, query], k_all[kv_head]  # D; S, D
    n_keys = k.shape[0]
    keys_at = np.arange(n_keys)
    at = query + (n_keys - n_queries)  # the query's own position among the keys
    visible = np.ones(n_keys, dtype=bool)
    if causal:
        visible = keys_at <= at
    if window is not None:
        visible &= (keys_at > at - window) if causal else (np.abs(keys_at - at) <= window // 2)
    products = q[None, :] * k * scale  # S, D
    bias = np.zeros(n_keys) if slope is None else slope * keys_at.astype(np.float64)
    extra = {name: np.asarray(term, dtype=np.float64) for name, term in (terms or {}).items()}
    for name, term in extra.items():
        if term.shape != (n_keys,):
            raise ValueError(f"score term {name!r} has shape {term.shape}, expected ({n_keys},)")
        bias = bias + term
    total = products.sum(axis=-1) + bias
    if softcap is not None:
        total = softcap * np.tanh(total / softcap)
    scores = np.where(visible, total, np.nan)
    top = np.nanmax(scores) if sink is None else max(np.nanmax(scores), sink)
    shifted = np.exp(np.where(visible, scores - top, -np.inf))
    denominator = shifted.sum() + (0.0 if sink is None else np.exp(sink - top))
    probabilities = shifted / denominator
    return QueryKeyView(
        head=head, kv_head=kv_head, query_position=query, query=q, keys=k, products=products,
        scores=scores, bias=bias, positive=np.where(products > 0, products, 0).sum(axis=-1),
        negative=np.where(products < 0, products, 0).sum(axis=-1), visible=visible,
        probabilities=probabilities, capped=softcap is not None,
        sink_share=0.0 if sink is None else float(1.0 - probabilities.sum()), terms=extra or None,
        parts=None if rope_from is None else {"no-rope": products[:, :rope_from].sum(axis=-1),
                                              "rope": products[:, rope_from:].sum(axis=-1)},
    )
