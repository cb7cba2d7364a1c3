"""The result of one forward pass: tokens, their place in the text, words, and every head's attention
(`AttentionTrace`, `Seq2SeqTrace`), or a long text's reduced views of it (`ReducedTrace`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.trace.words import is_punctuation


@dataclass(kw_only=True)
class BaseTrace:
    """The fields every trace of one text has: its tokens, their place in the text, its words. Keyword-only
    (here and in the traces built on it): the fields are many and alike, and each trace adds its own."""

    tokens: list[str]
    offsets: list[tuple[int, int]]
    sequence_ids: list[int | None]
    input_ids: list[int]
    kv_group: list[int]
    words: list[str]
    word_of_token: list[int | None]
    truncated: bool
    texts: tuple[str, ...] = ()
    word_spans: list[tuple[int, int]] = field(default_factory=list)
    word_sequence: list[int] = field(default_factory=list)
    special_mask: list[bool] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    # Final hidden state [T, C] float32 (after the final norm): what the unembedding would read.
    hidden: np.ndarray | None = None

    @property
    def _per_head(self) -> np.ndarray:
        """An array [layers, heads, ...] the trace holds: what `n_layers` and `n_heads` read."""
        raise NotImplementedError

    @property
    def n_layers(self) -> int:
        return self._per_head.shape[0]

    @property
    def n_heads(self) -> int:
        return self._per_head.shape[1]


@dataclass(kw_only=True)
class AttentionTrace(BaseTrace):
    """Everything one `model.run` saw and computed. `attentions` is float32 [layers, heads, T, S]."""

    attentions: np.ndarray

    @property
    def _per_head(self) -> np.ndarray:
        return self.attentions


@dataclass(kw_only=True)
class Seq2SeqTrace(AttentionTrace):
    """One encoder-decoder pass (a translation model). The inherited fields are the encoder's, the source
    side (`attentions` = encoder self-attention [L, H, S, S]), so every single-sequence view, the Head
    Finder and the probe read the source. The decoder's side: its input tokens (the decoder start token,
    then the target shifted right, HF's `decoder_input_ids`), causal self-attention [L, H, T, T] and
    cross-attention [L, H, T, S] (decoder queries, encoder keys: an alignment of target to source)."""

    decoder_attentions: np.ndarray | None = None  # float32 [L_dec, H, T, T]
    cross_attentions: np.ndarray | None = None  # float32 [L_dec, H, T, S]
    target_text: str = ""
    target_tokens: list[str] = field(default_factory=list)
    target_offsets: list[tuple[int, int]] = field(default_factory=list)  # spans in target_text
    target_input_ids: list[int] = field(default_factory=list)  # decoder_input_ids
    labels: list[int] = field(default_factory=list)  # what each decoder position is trained to predict
    target_special_mask: list[bool] = field(default_factory=list)
    target_words: list[str] = field(default_factory=list)
    target_word_spans: list[tuple[int, int]] = field(default_factory=list)
    target_word_of_token: list[int | None] = field(default_factory=list)  # of each decoder input token
    # The target word each decoder position *predicts* (its label): row t of the cross-attention is the step
    # that produces labels[t], which is how alignments are read from it (Garg et al. 2019).
    label_word_of_token: list[int | None] = field(default_factory=list)
    target_truncated: bool = False
    generated: bool = False  # True when target_text is the model's own greedy translation

    @property
    def encoder_attentions(self) -> np.ndarray:
        return self.attentions


def special_token_mask(special_mask: list[bool], sequence_ids: list[int | None]) -> np.ndarray:
    """[T] bool: the tokenizer's special-tokens mask, or tokens outside both sentences when it is empty."""
    if len(special_mask) == len(sequence_ids) and special_mask:
        return np.asarray(special_mask, dtype=bool)
    return np.asarray([seq is None for seq in sequence_ids], dtype=bool)


def punctuation_token_mask(tokens: list[str], special: np.ndarray) -> np.ndarray:
    """[T] bool: non-special tokens whose label is all punctuation (whitespace ignored)."""
    marks = []
    for token, is_special in zip(tokens, special):
        label = "".join(token.split())
        marks.append(bool(label) and not is_special and all(is_punctuation(c) for c in label))
    return np.asarray(marks, dtype=bool)


@dataclass(kw_only=True)
class ReducedTrace(BaseTrace):
    """A long text's trace without its [L, H, T, T] maps (docs/performance.md, "Long contexts"): the token
    and word fields of every trace (`BaseTrace`), and what the pass reduced (attnviz.models.view_reductions).

    - `tiles[name]` [L, H, t, s] float32: the pooled mosaic tiles (pool_tiles with `tile` cells a side, on the
      edges of attnviz.trace.tiles) of the view "token", "token_hide_special" or "word" (`view_tiles`);
    - `statistics[name]` [L, H] float64 and `argmax` [L, H, T]: the head profile (analysis.profile_reduced);
    - `queries` [L, H, T, D], `keys` [L, K, S, D] (float16 unless asked otherwise) and `score_setups[l][h]`
      (Transformer.score_setup): any head's exact map over a window of rows (`head_window`).
    """

    tile: int
    tiles: dict[str, np.ndarray]
    statistics: dict[str, np.ndarray]
    argmax: np.ndarray
    queries: np.ndarray
    keys: np.ndarray
    score_setups: list[list[dict]]

    @property
    def _per_head(self) -> np.ndarray:
        return self.queries

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (what grows with T: queries, keys, argmax, hidden; the tiles do not)."""
        arrays = [self.argmax, self.queries, self.keys, *self.tiles.values(), *self.statistics.values()]
        return sum(a.nbytes for a in arrays) + (self.hidden.nbytes if self.hidden is not None else 0)

    def view_tiles(self, level: str = "token", hide_special: bool = False, first_aside: bool = False) -> np.ndarray:
        """The pooled tiles of attention_view(level, hide_special) (hide_special: token level only; a text
        without special tokens has the token view's); with `first_aside`, of the view with the first token
        set aside (analysis.sink.trace_first_aside; a decoder's trace only)."""
        if level not in ("token", "word"):
            raise ValueError(f"level must be 'token' or 'word', got {level!r}")
        aside = "_first_aside" if first_aside else ""
        if first_aside and "token_first_aside" not in self.tiles:
            raise ValueError("this trace has no views with the first token set aside (a decoder's, of 2+ tokens)")
        if level == "word":
            if "word" + aside not in self.tiles:
                raise ValueError("no token of this text belongs to a word")
            return self.tiles["word" + aside]
        if hide_special and "token_hide_special" + aside in self.tiles:
            return self.tiles["token_hide_special" + aside]
        if hide_special and special_token_mask(self.special_mask, self.sequence_ids).all():
            raise ValueError("the input has only special tokens")
        return self.tiles["token" + aside]

    def head_window(self, layer: int, head: int, rows: slice | range, cols: slice | range | None = None) -> np.ndarray:
        """float32 [R, C]: head `head` of layer `layer`'s attention probabilities for query rows `rows` and
        key columns `cols` (default all), recomputed from the kept queries and keys: each row's scores over
        every key it may see (its softmax denominator), then the window's columns. Equal to the full map's
        slice up to the rounding of the kept queries and keys (exact to float32 rounding when kept in float32)."""
        if not (0 <= layer < self.n_layers and 0 <= head < self.n_heads):
            raise ValueError(f"no head ({layer}, {head}) in a model of {self.n_layers} x {self.n_heads} heads")
        n_queries, n_keys = self.queries.shape[2], self.keys.shape[2]
        row_at = np.arange(n_queries)[rows]
        setup = self.score_setups[layer][head]
        q = self.queries[layer, head, row_at].astype(np.float64)  # R, D
        k = self.keys[layer, self.kv_group[head]].astype(np.float64)  # S, D
        scale = q.shape[-1] ** -0.5 if setup.get("scale") is None else setup["scale"]
        scores = (q * scale) @ k.T  # R, S
        keys_at = np.arange(n_keys)
        if setup.get("slope") is not None:
            scores = scores + setup["slope"] * keys_at
        if setup.get("softcap") is not None:
            scores = setup["softcap"] * np.tanh(scores / setup["softcap"])
        at = (row_at + (n_keys - n_queries))[:, None]  # each query's position among the keys
        visible = np.ones(scores.shape, dtype=bool)
        if setup.get("causal"):
            visible = keys_at[None, :] <= at
        window = setup.get("window")
        if window is not None:
            near = (keys_at[None, :] > at - window) if setup.get("causal") else (np.abs(keys_at - at) <= window // 2)
            visible &= near
        visible |= ~visible.any(axis=-1, keepdims=True)  # a row that sees nothing: uniform, HF's rule
        scores = np.where(visible, scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        sink = setup.get("sink")
        if sink is not None:
            top = np.maximum(top, sink)
        shifted = np.exp(scores - top)
        denominator = shifted.sum(axis=-1, keepdims=True) + (0.0 if sink is None else np.exp(sink - top))
        probabilities = shifted / denominator
        return probabilities[:, slice(None) if cols is None else cols].astype(np.float32)
