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
encoder (`attribute_encoder`, an encoder-decoder of attnviz.transformer.seq2seq): its components are the
token embedding, each earlier encoder head and MLP, and its relative-position bucket bias is a term of its own
({"query": "t5_bucket", "key": "t5_bucket"}); the post-norm encoder-decoders (Marian, BART) are not split.

The same split of score(i, j) - score(i, j') (`key2`) says why key j beats key j': its sum is the log-ratio
of the two attention weights (before a soft-cap; with one, of the capped scores).

Shape legend: P stream parts, N positions read (i, j and j'), C model width, H heads, K KV heads, D head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models.loaded_model import LoadedModel
from attnviz.transformer.decompose import DECOMPOSE_NAMES, frozen_norm, head_parts, stream_parts
from attnviz.transformer.mla import LatentAttention
from attnviz.transformer.record import Recorder
from attnviz.transformer.rope import apply_rotary

RECORD_NAMES = (*DECOMPOSE_NAMES, "queries", "keys", "score_terms")
PROJECTION_BIAS = "bias"  # the q (or k) projection's bias, and the shift of a q/k norm that has one
T5_BUCKET = "t5_bucket"  # T5's learned bias of the bucket of the relative position j - i


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
    return _rotated(values, rotary, positions)


def _through(values: torch.Tensor, linear) -> torch.Tensor:
    """[P + 1, N, W] (the bias row last) through a linear map; its bias joins the last row."""
    values = values @ linear.weight.double().T
    if linear.bias is not None:
        values[-1] = values[-1] + linear.bias.double()
    return values


def _rotated(values: torch.Tensor, rotary, positions: list[int]) -> torch.Tensor:
    if rotary is None:
        return values
    cos, sin = (r[:1, positions].double() for r in rotary)  # 1, N, R
    return apply_rotary(values[:, None], cos, sin)[:, 0]  # a rotation per position: linear


def _latent_sides(attention: LatentAttention, norm, parts: torch.Tensor, head: int, rotary, positions: list[int]):
    """MLA (DeepSeek): the query and key sides [P + 1, N, D] of head `head`, each the no-rope part then the
    rotated rope part. The query comes from q_proj, or the low-rank path with its norm frozen; the key's
    no-rope part from the latent (kv_a_proj_with_mqa, kv_a_layernorm frozen, this head's rows of kv_b_proj),
    its rope part from the rotary key every head shares."""
    values = parts if norm is None else _frozen(norm, parts)  # P, N, C
    values = torch.cat([values, values.new_zeros(1, *values.shape[1:])])  # P + 1: the projections' biases last
    nope = attention.nope
    if attention.q_proj is not None:
        q = _through(values, attention.q_proj)
    else:
        q = _through(_frozen(attention.q_a_layernorm, _through(values, attention.q_a_proj)), attention.q_b_proj)
    q = q.view(*q.shape[:2], attention.n_heads, attention.head_dim)[:, :, head]  # P + 1, N, D
    q = torch.cat([q[..., :nope], _rotated(q[..., nope:], rotary, positions)], dim=-1)
    compressed = _through(values, attention.kv_a_proj_with_mqa)  # P + 1, N, R + rope
    latent = _frozen(attention.kv_a_layernorm, compressed[..., :attention.kv_lora_rank])
    kv = _through(latent, attention.kv_b_proj).view(*latent.shape[:2], attention.n_heads, -1)[:, :, head]
    k = torch.cat([kv[..., :nope], _rotated(compressed[..., attention.kv_lora_rank:], rotary, positions)], dim=-1)
    return q, k


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
    keys = [key] if key2 is None else [key, key2]
    _checked(c.n_layers, c.n_heads, t, layer, head, [query, *keys])
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
    if isinstance(attention, LatentAttention):
        q, k = _latent_sides(attention, norm, parts.values, head, rotary, positions)
        q, k = q[:, 0], k[:, 1:]  # Q, D; K, len(keys), D
    else:
        q = _side(attention, norm, parts.values, attention.q_proj, attention.q_norm, attention.n_heads, head,
                  rotary, positions)[:, 0]  # Q, D
        k = _side(attention, norm, parts.values, attention.k_proj, attention.k_norm, attention.n_kv_heads,
                  kv_head, rotary, positions)[:, 1:]  # K, len(keys), D
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


def _checked(n_layers: int, n_heads: int, t: int, layer: int, head: int, positions: list[int]) -> None:
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer} outside 0..{n_layers - 1}")
    if not 0 <= head < n_heads:
        raise ValueError(f"head {head} outside 0..{n_heads - 1}")
    for position in positions:
        if not 0 <= position < t:
            raise ValueError(f"position {position} outside 0..{t - 1} (the text has {t} tokens)")


def _encoder_parts(module, record: Recorder, input_ids: torch.Tensor, positions: list[int], layer: int):
    """(names, [P, N, C] float64): the stream entering encoder block `layer` of a pre-norm encoder-decoder at
    `positions` as its parts: "embed" (T5's unscaled token embedding), each earlier head's output c_h W_O^h,
    each earlier MLP's output, "rest" (the output projections' biases, none in T5)."""
    names, values = ["embed"], [module._embed("encoder", input_ids[:1])[0, positions].double()]
    rest = torch.zeros_like(values[0])
    for earlier in range(layer):
        attention, recorded = module.encoder_blocks[earlier].self_attn, record.layers[earlier]
        heads = head_parts(attention, recorded["head_outputs"][0][:, positions])  # H, N, C
        names += [f"L{earlier}.H{h}" for h in range(heads.shape[0])] + [f"L{earlier}.mlp"]
        values += [*heads, recorded["mlp_outputs"][0, positions].double()]
        if attention.o_proj.bias is not None:
            rest = rest + attention.o_proj.bias.double()
    return names + ["rest"], torch.stack([*values, rest])


@torch.no_grad()
def attribute_encoder(module, record: Recorder, input_ids: torch.Tensor, layer: int, head: int, query: int,
                      key: int, key2: int | None = None) -> QKAttribution:
    """`attribute` for the encoder self-attention of a pre-norm encoder-decoder (T5, `EncoderDecoder`) whose
    `encode` on `input_ids` (batch row 0) recorded RECORD_NAMES. The bucket bias of (query, key) is the term
    T5_BUCKET; the encoder sees every position, so every key is visible."""
    c = module.config
    if c.norm_placement != "pre":
        raise ValueError("query-key attribution of an encoder-decoder takes a pre-norm one (T5): Marian's and "
                         "BART's norms after every residual are not split")
    t = input_ids.shape[1]
    keys = [key] if key2 is None else [key, key2]
    positions = [query, *keys]
    _checked(len(module.encoder_blocks), c.n_heads, t, layer, head, positions)
    block = module.encoder_blocks[layer]
    attention = block.self_attn
    kv_head = attention.kv_group[head]
    names, parts = _encoder_parts(module, record, input_ids, positions, layer)
    q = _side(attention, block.self_attn_norm, parts, attention.q_proj, attention.q_norm, attention.n_heads, head,
              None, positions)[:, 0]  # Q, D
    k = _side(attention, block.self_attn_norm, parts, attention.k_proj, attention.k_norm, attention.n_kv_heads,
              kv_head, None, positions)[:, 1:]  # K, len(keys), D
    scale = attention.scale if attention.scale is not None else attention.head_dim ** -0.5
    sign = torch.tensor([1.0] if key2 is None else [1.0, -1.0], dtype=torch.float64)
    matrix = scale * torch.einsum("ad,bnd,n->ab", q, k, sign)
    names = names + [PROJECTION_BIAS]
    bias = module.position_bias("encoder", t, t)  # 1, H, T, S or None
    recorded = record.layers[layer]
    own_q, own_k = recorded["queries"][0, head, query].double(), recorded["keys"][0, kv_head].double()
    scores = tuple(scale * float(own_q @ own_k[j]) + (0.0 if bias is None else float(bias[0, head, query, j]))
                   for j in keys)
    terms = [] if bias is None else [
        Term(T5_BUCKET, T5_BUCKET, sum(float(s * bias[0, head, query, j]) for s, j in zip(sign, keys)))]
    return QKAttribution(layer, head, kv_head, query, key, key2, names, list(names), matrix.numpy(), terms,
                         scores, None)


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
    if hasattr(model.module, "encoder_blocks"):  # an encoder-decoder: its encoder's self-attention
        if text_pair is not None:
            raise ValueError("an encoder-decoder reads one source text: a second sentence is for an encoder")
        encoding = model.encode(text)
        if not encoding.ids:
            raise ValueError("the text produced no tokens")
        record = Recorder(*RECORD_NAMES)
        ids = torch.tensor([encoding.ids], device=model.info.device)
        model.module.encode(ids, record=record)
        return attribute_encoder(model.module, record, ids, layer, head, query, key, key2)
    encoding = model.encode(text, text_pair)
    if not encoding.ids:
        raise ValueError("the text produced no tokens")
    record = Recorder(*RECORD_NAMES)
    model.forward_encodings([encoding], with_logits=False, record=record)
    device = model.info.device
    ids = torch.tensor([encoding.ids], device=device)
    types = torch.tensor([encoding.type_ids], device=device)
    return attribute(model.module, record, ids, layer, head, query, key, key2, types)
