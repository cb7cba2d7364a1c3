"""The result of one forward pass: tokens, their place in the text, words, and every head's attention.

Word rule (docs/architecture.md): a word of free text is a whitespace-separated span, except that a run of
Han characters is split into words by jieba (`jieba.lcut` with its defaults: precise mode, HMM on, its
default dictionary), and every other CJK character (kana, hangul) and every punctuation character is a
word of its own. A token belongs to the first word whose character span overlaps the token's span as
half-open intervals.
"""

from __future__ import annotations

import string
import threading
import unicodedata
from dataclasses import dataclass, field

import numpy as np

# (start, end) code point ranges of the scripts written without spaces between words.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # half-width Katakana and Hangul
    (0x1B000, 0x1B16F),  # Kana supplement and extended A
    (0x20000, 0x323AF),  # CJK extensions B-H
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


# Han ideographs (Unicode script Han): the CJK unified ideographs and their extensions, the compatibility
# ideographs, and the ideographic number zero 〇 (二〇二四年). Radicals, kana and hangul are not Han.
_HAN_RANGES = (
    (0x3007, 0x3007),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x323AF),
)


def is_han(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _HAN_RANGES)


_segmenter = None
_segmenter_lock = threading.Lock()
# Resident bytes the segmenter adds once built (its prefix dictionary, ~500,000 Python strings: 70 MB
# measured with /proc/self/statm), for callers that reserve memory before a first Chinese text.
HAN_SEGMENTER_BYTES = 80_000_000


def han_segmenter_needed(text: str) -> bool:
    """True when splitting `text` would build the segmenter: it has Han characters and none was built yet."""
    return _segmenter is None and any(is_han(char) for char in text)


def han_segmenter():
    """jieba's segmenter with its default dictionary, built once per process, in memory, on the first run of
    Han characters (about 0.7 s of CPU and 70 MB resident; texts without Han never import jieba).

    `jieba.initialize` is not used: it loads a cache file from the system's temp directory
    (`/tmp/jieba.cache`) if one is there, and writes one otherwise. On a shared host that file is anyone's,
    and marshal data read from it would become our dictionary; building the prefix dictionary from the
    dictionary file in jieba's package gives the same dictionary and touches no file but that one."""
    global _segmenter
    if _segmenter is None:
        with _segmenter_lock:
            if _segmenter is None:
                import jieba

                segmenter = jieba.Tokenizer()  # the default dictionary (jieba/dict.txt)
                segmenter.FREQ, segmenter.total = segmenter.gen_pfdict(segmenter.get_dict_file())
                segmenter.initialized = True  # so `cut` never calls `initialize`
                _segmenter = segmenter
    return _segmenter


def split_han(run: str) -> list[str]:
    """The words of a run of Han characters: `jieba.lcut(run)` with its defaults (precise mode, HMM on).
    jieba keeps every character of such a run; should it not, each character is a word, as before."""
    words = han_segmenter().lcut(run)
    return words if "".join(words) == run else list(run)


def is_punctuation(char: str) -> bool:
    # Unicode punctuation (P*), plus ASCII symbols such as < > $ that Unicode files under S*.
    return unicodedata.category(char).startswith("P") or char in string.punctuation


def split_words(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the words of free text, by the rule in the module docstring."""
    spans: list[tuple[int, int]] = []
    start = han = None  # where the open word, or the open run of Han characters, began

    def close_han(end: int) -> None:
        position = han
        for word in split_han(text[han:end]):
            spans.append((position, position + len(word)))
            position += len(word)

    for i, char in enumerate(text):
        if is_han(char):
            if start is not None:
                spans.append((start, i))
                start = None
            if han is None:
                han = i
            continue
        if han is not None:
            close_han(i)
            han = None
        if char.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif is_cjk(char) or is_punctuation(char):
            if start is not None:
                spans.append((start, i))
                start = None
            spans.append((i, i + 1))
        elif start is None:
            start = i
    if han is not None:
        close_han(len(text))
    if start is not None:
        spans.append((start, len(text)))
    return spans


def spans_of_joined_words(words: list[str], sep: str = " ") -> tuple[str, list[tuple[int, int]]]:
    """The text `sep.join(words)` and each word's span in it (probe files and treebanks bring words)."""
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + len(sep)
    return sep.join(words), spans


def align_tokens_to_words(
    offsets: list[tuple[int, int]],
    sequence_ids: list[int | None],
    word_spans: list[tuple[int, int]],
    word_sequence: list[int] | None = None,
) -> list[int | None]:
    """Index of the first word overlapping each token (half-open), or None.

    `word_sequence[w]` says which sentence (0 or 1) word w is in; tokens only match words of their
    own sentence, since offsets are relative to the token's own sentence.
    """
    if word_sequence is None:
        word_sequence = [0] * len(word_spans)
    result: list[int | None] = []
    for (ts, te), seq in zip(offsets, sequence_ids):
        match = None
        if seq is not None and ts < te:
            for w, (ws, we) in enumerate(word_spans):
                if word_sequence[w] == seq and ts < we and ws < te:
                    match = w
                    break
        result.append(match)
    return result


@dataclass
class AttentionTrace:
    """Everything one `model.run` saw and computed. `attentions` is float32 [layers, heads, T, S]."""

    tokens: list[str]
    offsets: list[tuple[int, int]]
    sequence_ids: list[int | None]
    input_ids: list[int]
    attentions: np.ndarray
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
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]


@dataclass
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


@dataclass
class ReducedTrace:
    """A long text's trace without its [L, H, T, T] maps (docs/architecture.md, "Long contexts"): the same
    token and word fields as AttentionTrace, and what attnviz.transformer.reduce computed during the pass.

    - `tiles[name]` [L, H, t, s] float32: the pooled mosaic tiles (pool_tiles with `tile` cells a side) of
      the view "token", "token_hide_special" or "word" (`view_tiles`);
    - `statistics[name]` [L, H] float64 and `argmax` [L, H, T]: the head profile (analysis.profile_reduced);
    - `queries` [L, H, T, D], `keys` [L, K, S, D] (float16 unless asked otherwise) and `score_setups[l][h]`
      (Transformer.score_setup): any head's exact map over a window of rows (`head_window`).
    """

    tokens: list[str]
    offsets: list[tuple[int, int]]
    sequence_ids: list[int | None]
    input_ids: list[int]
    kv_group: list[int]
    words: list[str]
    word_of_token: list[int | None]
    truncated: bool
    tile: int
    tiles: dict[str, np.ndarray]
    statistics: dict[str, np.ndarray]
    argmax: np.ndarray
    queries: np.ndarray
    keys: np.ndarray
    score_setups: list[list[dict]]
    texts: tuple[str, ...] = ()
    word_spans: list[tuple[int, int]] = field(default_factory=list)
    word_sequence: list[int] = field(default_factory=list)
    special_mask: list[bool] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    hidden: np.ndarray | None = None

    @property
    def n_layers(self) -> int:
        return self.queries.shape[0]

    @property
    def n_heads(self) -> int:
        return self.queries.shape[1]

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
