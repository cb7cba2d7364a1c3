"""Query-key attribution: one head's pre-softmax score of query i on key j, split exactly into one term per
(query-side component, key-side component) pair, the components being the parts of the residual stream that
enters the layer (attnviz.transformer.decompose.stream_parts: "embed", "pos_embed", "type_embed", each
earlier head "L{l}.H{h}", each earlier MLP "L{l}.mlp", "rest" = the stream's biases) plus the q or k
projection's own bias ("bias").

Once every norm's scale is frozen at this run's value, the path from the stream to q_i and k_j is linear:
the layer's attention norm (none for post-norm models, which read the block input as it is, nor for OLMo 2,
whose norm is after the attention), the q/k projection, the q/k norm (per head over D: Qwen3, Gemma 3; over
the whole projection: OLMo 2; each frozen at its own position), rotary at each position (a rotation). So
q_i = sum_a q_a and k_j = sum_b k_b, and

    score(i, j) = scale * q_i . k_j + position terms = sum_{a,b} scale * q_a . k_b + position terms.

Position terms that are no q . k keep their own names: ALiBi's slope_h * j ({"query": "alibi", "key":
"alibi"}); DeBERTa's c2p = scale * q_i . pk[d(i, j)], linear in the query side, split by query component
({"query": a, "key": "c2p"}); p2c = scale * k_j . pq[d(i, j)] split by key component ({"query": "p2c",
"key": b}). Gemma 2's soft-cap is not linear: `score` is before the cap, and `capped` applies it to the
sum. gpt-oss's learned sinks join the softmax's denominator, not any score: they change no term. T5's
buckets (an encoder-decoder, attnviz.transformer.seq2seq) are left out: only `Transformer` models.

The same split of score(i, j) - score(i, j') (`key2`) says why key j beats key j': its sum is the log-ratio
of the two attention weights (before a soft-cap; with one, of the capped scores).

Shape legend: P stream parts, N positions read (i, j and j'), C model width, H heads, K KV heads, D head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.tracing.model import LoadedModel
from attnviz.transformer.decompose import DECOMPOSE_NAMES, frozen_norm, stream_parts
from attnviz.transformer.record import Recorder
from attnviz.transformer.rope import apply_rotary

RECORD_NAMES = (*DECOMPOSE_NAMES, "queries", "keys", "score_terms")
PROJECTION_BIAS = "bias"  # the q (or k) projection's bias, and the shift of a q/k norm that has one


@dataclass(frozen=True)
class Term:
    query: str
    key: str
    value: float


@dataclass
class QKAttribution:
    """scale * q_a . k_b for every pair of components, and the position terms, of head `head` of layer `layer`
    at query `query` and key `key` (or of the difference key - key2)."""

    layer: int
    head: int
    kv_head: int
    query: int
    key: int
    key2: int | None
    query_names: list[str]
    key_names: list[str]
    matrix: np.ndarray  # Q, K float64: scale * q_a . k_b (of the difference k_b(j) - k_b(j') with key2)
    position_terms: list[Term]
    scores: tuple[float, ...]  # the model's own pre-softmax, pre-cap score at key (and at key2)
    softcap: float | None

    @property
    def score(self) -> float:
        """The model's pre-softmax score before any soft-cap (score(i, j) - score(i, j') with key2)."""
        return self.scores[0] if self.key2 is None else self.scores[0] - self.scores[1]

    @property
    def capped(self) -> float:
        """What the softmax sees: the score after the soft-cap where the model has one (with key2: the
        difference of the capped scores, the log-ratio of the two weights)."""
        cap = self.softcap
        capped = [s if cap is None else cap * float(np.tanh(s / cap)) for s in self.scores]
        return capped[0] if self.key2 is None else capped[0] - capped[1]

    @property
    def total(self) -> float:
        return float(self.matrix.sum()) + sum(t.value for t in self.position_terms)

    def terms(self) -> list[Term]:
        """Every term, content pairs in matrix order, then the position terms; they sum to `score`."""
        pairs = [Term(q, k, float(self.matrix[a, b])) for a, q in enumerate(self.query_names)
                 for b, k in enumerate(self.key_names)]
        return pairs + list(self.position_terms)

    def largest(self, n: int = 10) -> list[Term]:
        """The n terms of largest magnitude, largest first."""
        return sorted(self.terms(), key=lambda term: -abs(term.value))[:n]

    def table(self, grouped: bool = False) -> tuple[list[str], list[str], np.ndarray]:
        """(query names, key names, [rows, columns] float64): every term in a query x key matrix that sums to
        `score`, the position terms as rows or columns of their own (c2p a column, p2c a row, ALiBi both);
        `grouped`: by layer (`layer_group`: each layer's heads summed, the embeddings summed)."""
        rows: dict[str, int] = {}
        columns: dict[str, int] = {}
        cells = []
        for term in self.terms():
            query = layer_group(term.query) if grouped else term.query
            key = layer_group(term.key) if grouped else term.key
            cells.append((rows.setdefault(query, len(rows)), columns.setdefault(key, len(columns)), term.value))
        matrix = np.zeros((len(rows), len(columns)))
        for row, column, value in cells:
            matrix[row, column] += value
        return list(rows), list(columns), matrix

    @staticmethod
    def layers(names: list[str]) -> list[int | None]:
        """Each name's layer (`layer_of`): where a matrix's dividers go."""
        return [layer_of(name) for name in names]


def layer_group(name: str) -> str:
    """The group a component is summed into when grouped by layer: "embeddings" (token, position, type),
    "L{l}.heads" (all of layer l's heads), and every other name as it is ("L{l}.mlp", "rest", "bias", ...)."""
    if name.endswith("embed"):
        return "embeddings"
    if ".H" in name:
        return name.split(".H")[0] + ".heads"
    return name


def layer_of(name: str) -> int | None:
    """The layer of a head's or an MLP's component ("L3.H5", "L3.mlp", "L3.heads"), else None."""
    return int(name[1:].split(".")[0]) if name.startswith("L") and "." in name else None


def _reads_norm(block):
    """The norm before the attention, or None where it reads the block's input as it is (post-norm: BERT's
    norms come after each residual; "after": OLMo 2's come after each sublayer; ModernBERT's layer 0)."""
    if block.residual == "sequential" and block.placement == "post":
        return None
    return block.attn_norm


def _frozen(norm, values: torch.Tensor) -> torch.Tensor:
    """values [P, N, W] through `norm` over W with its scale frozen at their sum; its shift joins the last one."""
    scale, shift, centre = frozen_norm(norm, values.sum(0))
    values = (values - values.mean(-1, keepdim=True) if centre else values) * scale
    if shift is not None:
        values[-1] = values[-1] + shift
    return values


def _side(attention, norm, parts: torch.Tensor, projection, qk_norm, n_heads: int, head: int, rotary,
          positions: list[int]) -> torch.Tensor:
    """[P + 1, N, D] float64: each stream part's share of head `head`'s query (or key) at `positions`, the
    projection's bias (with a q/k norm's shift) last; they sum to the model's q (or k) after rotary."""
    values = parts if norm is None else _frozen(norm, parts)  # P, N, C: the norm's shift joins "rest"
    values = values @ projection.weight.double().T  # P, N, heads * D
    bias = values.new_zeros(values.shape[1:]) if projection.bias is None else \
        projection.bias.double().expand(values.shape[1], -1)  # N, heads * D
    values = torch.cat([values, bias[None]])  # P + 1, N, heads * D
    if qk_norm is not None and attention.qk_norm == "projection":  # OLMo 2: over every head at once
        values = _frozen(qk_norm, values)
    values = values.view(*values.shape[:2], n_heads, attention.head_dim)[:, :, head]  # P + 1, N, D
    if qk_norm is not None and attention.qk_norm == "head":  # Qwen3, Gemma 3: over this head's D
        values = _frozen(qk_norm, values)
    if rotary is not None:
        cos, sin = (r[:1, positions].double() for r in rotary)  # 1, N, R
        values = apply_rotary(values[:, None], cos, sin)[:, 0]  # a rotation per position: linear
    return values


def _visible(mask, query: int, key: int, t: int) -> bool:
    return mask is None or bool(torch.broadcast_to(mask, (1, 1, t, t))[0, 0, query, key])


@torch.no_grad()
def attribute(module, record: Recorder, input_ids: torch.Tensor, layer: int, head: int, query: int, key: int,
              key2: int | None = None, token_type_ids: torch.Tensor | None = None) -> QKAttribution:
    """The split of one score of a forward pass of `module` (a Transformer) on `input_ids` (batch row 0) that
    recorded RECORD_NAMES. ValueError for a layer, head or position out of range, and for a key the query
    does not see (a causal mask, a sliding window)."""
    c = module.config
    t = input_ids.shape[1]
    if not 0 <= layer < c.n_layers:
        raise ValueError(f"layer {layer} outside 0..{c.n_layers - 1}")
    if not 0 <= head < c.n_heads:
        raise ValueError(f"head {head} outside 0..{c.n_heads - 1}")
    keys = [key] if key2 is None else [key, key2]
    for position in [query, *keys]:
        if not 0 <= position < t:
            raise ValueError(f"position {position} outside 0..{t - 1} (the text has {t} tokens)")
    block = module.blocks[layer]
    attention = block.attn
    mask, rotary, bias = module.layer_inputs(input_ids[:1])[layer]
    for k in keys:
        if not _visible(mask, query, k, t):
            window = c.window(layer)
            why = f"a sliding window of {window}" if window is not None else "the causal mask"
            raise ValueError(f"key {k} is not visible to query {query} in layer {layer} ({why}): "
                             "its attention weight is 0 and its score is not used")
    kv_head = attention.kv_group[head]
    positions = [query, *keys]
    parts = stream_parts(module, record, input_ids, positions, layer, token_type_ids)
    norm = _reads_norm(block)
    q = _side(attention, norm, parts.values, attention.q_proj, attention.q_norm, attention.n_heads, head,
              rotary, positions)[:, 0]  # Q, D
    k = _side(attention, norm, parts.values, attention.k_proj, attention.k_norm, attention.n_kv_heads, kv_head,
              rotary, positions)[:, 1:]  # K, len(keys), D
    scale = attention.scale if attention.scale is not None else attention.head_dim ** -0.5
    sign = torch.tensor([1.0] if key2 is None else [1.0, -1.0], dtype=torch.float64)  # key2: key minus key2
    matrix = scale * torch.einsum("ad,bnd,n->ab", q, k, sign)  # Q, K
    names = list(parts.names) + [PROJECTION_BIAS]
    recorded = record.layers[layer]
    own_terms = recorded.get("score_terms")  # DeBERTa's c2c, c2p, p2c as the model computed them
    own_q, own_k = recorded["queries"][0, head, query].double(), recorded["keys"][0, kv_head].double()
    scores = []
    for j in keys:
        score = scale * float(own_q @ own_k[j])
        if module.slopes is not None:
            score += float(bias[0, head, 0, j])
        if own_terms is not None:
            score += float(own_terms[0, 1:, head, query, j].sum())
        scores.append(score)
    return QKAttribution(layer, head, kv_head, query, key, key2, names, list(names), matrix.numpy(),
                         _position_terms(module, attention, bias, q, k, names, head, query, keys, sign, scale),
                         tuple(scores), attention.softcap)


def _position_terms(module, attention, bias, q, k, names, head, query, keys, sign, scale) -> list[Term]:
    """The score's (or the difference's) position terms: ALiBi's slope times the key position; DeBERTa's c2p by
    query component (q [Q, D]), p2c by key component (k [K, len(keys), D])."""
    terms: list[Term] = []
    if module.slopes is not None:  # bias: [B, H, 1, S]
        terms.append(Term("alibi", "alibi", sum(float(s * bias[0, head, 0, j]) for s, j in zip(sign, keys))))
    for term in getattr(attention, "terms", ()):  # DeBERTa: bias is the layer's Relative table and index
        own = attention.k_proj if term == "c2p" else attention.q_proj
        extra = attention.pos_key_proj if term == "c2p" else attention.pos_query_proj
        table = (own if attention.share_att_key else extra)(bias.embeddings).double()  # P, H * D
        table = table.view(table.shape[0], attention.n_heads, attention.head_dim)[:, head]  # P, D
        rows = table[[int(bias.index[query, j]) for j in keys]]  # len(keys), D: pk (or pq) at d(i, j)
        if term == "c2p":  # scale * q_a . pk[d(i, j)]
            values = scale * torch.einsum("ad,nd,n->a", q, rows, sign)
            terms += [Term(name, "c2p", float(v)) for name, v in zip(names, values)]
        else:  # scale * k_b . pq[d(i, j)]
            values = scale * torch.einsum("bnd,nd,n->b", k, rows, sign)
            terms += [Term("p2c", name, float(v)) for name, v in zip(names, values)]
    return terms


@torch.inference_mode()
def qk_attribution(model: LoadedModel, text: str, layer: int, head: int, query: int, key: int,
                   key2: int | None = None, text_pair: str | None = None) -> QKAttribution:
    """`attribute` on one recorded forward pass of `text` (tokenized as `run` tokenizes it, special tokens
    included: positions count those tokens)."""
    if not hasattr(model.module, "blocks"):
        raise ValueError("query-key attribution takes self-attention models (not the translation models)")
    encoding = model.encode(text, text_pair)
    if not encoding.ids:
        raise ValueError("the text produced no tokens")
    record = Recorder(*RECORD_NAMES)
    model.forward_encodings([encoding], with_logits=False, record=record)
    device = model.info.device
    ids = torch.tensor([encoding.ids], device=device)
    types = torch.tensor([encoding.type_ids], device=device)
    return attribute(model.module, record, ids, layer, head, query, key, key2, types)
