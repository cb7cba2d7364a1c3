"""Which heads track a relation: the scoring rule of Clark et al. 2019, sec. 4-5 (docs/formats.md steps 1-5).

Shapes: L layers, H heads, T query tokens, S key tokens (T == S here), n words of the item's sentence.

Word-level attention is `W = (M.T @ A @ M) / counts`: `M` [T, n] is the token -> word one-hot matrix
and `counts[i]` the number of tokens of word i, so `W[l, h, i, j]` is the mean over the tokens of
word i of the sum over the tokens of word j. It is computed in float64: every entry is then an
exact sum of a few float32 numbers whatever the summation order, so ties stay ties and the
"first index on ties" rule does not depend on BLAS.

Choices docs/formats.md leaves open:
- A trace whose `texts` is set must have been run on `item.text` (else `ValueError`): it catches traces
  zipped to the wrong items.
- Baselines are computed over the scored items only (skipped items count nowhere). The best offset
  `k` (predict word i + k) is the most frequent gold offset; ties go to the smallest |k|, then to the
  negative k (the left neighbour, where most heads of English look). First-word predicts word 0,
  which is impossible when the read word is word 0 itself (j != i): that item counts wrong.
- A relation with no scored item gets NaN accuracies, no best head and no baselines (`null` in JSON).
- Causal traces (`trace.metadata["causal"] is True`): an item is scorable in a direction only when
  its gold word precedes the read word; accuracy and baselines of that direction count scorable items
  only (`n_scorable`). Every item of an encoder is scorable, so encoder numbers are those of the plain
  rule. A direction with no scorable item (but scored items) has no grid (`null`), no best head and
  no baselines: no head of a causal model can get it right.
- `sink_aware=True` (opt-in, meant for decoders): word 0 is no candidate of the argmax, so a head
  whose largest weight is the first token's attention sink predicts its next-largest word. Items
  whose gold word is word 0 then count wrong; the first-word baseline, reported beside, is their share.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from attnviz.analysis.items import ProbeItem
from attnviz.trace import AttentionTrace, align_tokens_to_words

DIRECTIONS = ("source_to_target", "target_to_source")


@dataclass(frozen=True)
class BestHead:
    layer: int
    head: int
    accuracy: float


@dataclass(frozen=True)
class Baseline:
    best_offset: int | None
    best_offset_accuracy: float | None
    first_word_accuracy: float | None


@dataclass
class RelationScore:
    """Per-direction head accuracies [L, H] (fractions in [0, 1]) and baselines of one relation."""

    relation: str
    n: int
    n_skipped: int
    accuracy: dict[str, np.ndarray]
    correct: dict[str, np.ndarray]
    best: dict[str, BestHead | None]
    baselines: dict[str, Baseline]
    n_scorable: dict[str, int] = field(default_factory=dict)  # per direction; == n for encoders
    sink_aware: bool = False

    def impossible(self, direction: str) -> bool:
        """True when items were scored but none can be in `direction` (a causal model cannot look ahead)."""
        return self.n > 0 and self.n_scorable.get(direction, self.n) == 0

    @property
    def source_to_target(self) -> np.ndarray:
        return self.accuracy["source_to_target"]

    @property
    def target_to_source(self) -> np.ndarray:
        return self.accuracy["target_to_source"]


# ---------------------------------------------------------------------------------------------
# Word-level attention


def self_attentions(trace: AttentionTrace) -> np.ndarray:
    """The trace's attentions [L, H, T, T], checked to be self-attention over its own tokens."""
    attentions = np.asarray(trace.attentions)
    if attentions.ndim != 4 or attentions.shape[2] != attentions.shape[3]:
        raise ValueError(f"expected self-attention [L, H, T, T], got shape {attentions.shape}")
    if attentions.shape[2] != len(trace.offsets):
        raise ValueError(
            f"attentions cover {attentions.shape[2]} tokens but the trace has {len(trace.offsets)}"
        )
    return attentions


def word_one_hot(word_of_token: Sequence[int | None], n_words: int) -> np.ndarray:
    """M [T, n] float64: M[t, w] = 1 where token t belongs to word w."""
    one_hot = np.zeros((len(word_of_token), n_words))
    for t, w in enumerate(word_of_token):
        if w is not None:
            one_hot[t, w] = 1.0
    return one_hot


def _segments(word_of_token: Sequence[int | None], place: dict[int, int]) -> tuple[np.ndarray, ...]:
    """The tokens that belong to a placed word, grouped by place: (token order, where each group starts in
    it, each group's place). `place` maps a word to its row or column of the result."""
    kept = [(place[w], t) for t, w in enumerate(word_of_token) if w is not None and w in place]
    kept.sort()  # by place, then token: each group's tokens in text order, so every sum has one order
    places = np.fromiter((p for p, _ in kept), dtype=np.intp, count=len(kept))
    order = np.fromiter((t for _, t in kept), dtype=np.intp, count=len(kept))
    starts = np.flatnonzero(np.r_[True, places[1:] != places[:-1]]) if len(kept) else np.empty(0, np.intp)
    return order, starts, places[starts]


def _as_slice(order: np.ndarray) -> slice | None:
    """`order` as a slice when it is a run of consecutive positions."""
    if len(order) and order[-1] - order[0] == len(order) - 1 and (len(order) < 2 or (np.diff(order) == 1).all()):
        return slice(int(order[0]), int(order[-1]) + 1)
    return None


# The float64 work of word attention is done in blocks of about this many bytes: a block of heads of
# one layer, and in the scorer a block of rows (docs/formats.md, "Scoring rule").
BLOCK_BYTES = 8 * 2**20


def word_attention_matrix(
    attentions: np.ndarray,
    word_of_token: Sequence[int | None],
    n_words: int,
    dtype=np.float64,
    rows: Sequence[int] | None = None,
    columns: Sequence[int] | None = None,
) -> np.ndarray:
    """W [L, H, R, C] from token attentions [L, H, T, T]: the rows `rows` and columns `columns` (word
    indices; default all n words, so [L, H, n, n]); rows and columns of words without tokens are 0.

    Segment sums (`np.add.reduceat`) over the tokens of each word, gathered in word order: the sum over a
    row word's tokens of the sum over a column word's tokens, in float64, divided once by the row word's
    token count. Linear in the attention cells: the one-hot matrix products it replaced cost T x T x n
    multiply-adds a head (benchmarks/bench_word_level.py). Computed one block of heads of one layer at a time (a
    float64 copy of a whole 512-token trace would take hundreds of MB; one block is about BLOCK_BYTES), only
    the query tokens of `rows` read, and stored as `dtype`. Every entry is the same float64 sum, in the same
    order, divided once, whichever rows and columns are asked for."""
    n_layers, n_heads = attentions.shape[0], attentions.shape[1]
    row_words = np.arange(n_words) if rows is None else np.asarray(rows, dtype=np.intp).reshape(-1)
    column_words = np.arange(n_words) if columns is None else np.asarray(columns, dtype=np.intp).reshape(-1)
    (unique_rows, row_copy), (unique_columns, column_copy) = (np.unique(row_words, return_inverse=True),
                                                              np.unique(column_words, return_inverse=True))
    if len(unique_rows) < len(row_words) or len(unique_columns) < len(column_words):
        # a word asked for twice (the words of one multi-word token share its unit): computed once, copied
        once = word_attention_matrix(attentions, word_of_token, n_words, dtype, unique_rows, unique_columns)
        return once[:, :, row_copy][:, :, :, column_copy]
    row_place = {int(w): k for k, w in enumerate(row_words)}
    column_place = {int(w): k for k, w in enumerate(column_words)}
    query, query_starts, row_at = _segments(word_of_token, row_place)
    key, key_starts, column_at = _segments(word_of_token, column_place)
    out = np.zeros((n_layers, n_heads, len(row_words), len(column_words)), dtype=dtype)
    if len(query) == 0 or len(key) == 0:
        return out
    counts = np.diff(np.r_[query_starts, len(query)]).astype(np.float64)[:, None]  # [R', 1]
    cells = np.ix_(row_at, column_at)
    # tokens in text order without gaps (the common case) are read as a slice, not gathered
    query_at, key_at = _as_slice(query), _as_slice(key)
    gather = (slice(None), query[:, None], key[None, :]) if query_at is None or key_at is None else None
    block = max(1, BLOCK_BYTES // max(1, 12 * len(query) * len(key)))
    for layer in range(n_layers):
        for start in range(0, n_heads, block):
            heads = attentions[layer, start : start + block]
            heads = heads[gather] if gather is not None else heads[:, query_at, key_at]  # [h, Tq, Tk]
            summed = np.add.reduceat(np.asarray(heads, dtype=np.float64), query_starts, axis=1)  # [h, R', Tk]
            del heads
            summed = np.add.reduceat(summed, key_starts, axis=2)  # [h, R', C']
            # sum first, divide once: equal sums stay equal
            out[layer, start : start + block][:, cells[0], cells[1]] = summed / counts
            del summed  # not held while the next block is gathered
    return out


def _align_to_sorted_words(
    offsets: Sequence[tuple[int, int]], sequence_ids: Sequence[int | None], spans: Sequence[tuple[int, int]]
) -> list[int | None]:
    """`align_tokens_to_words` for the sorted, disjoint spans of an item's joined words (first sentence
    only), by bisection: T x n comparisons for a long item took seconds."""
    ends = [end for _, end in spans]
    result: list[int | None] = []
    for (ts, te), seq in zip(offsets, sequence_ids):
        match = None
        if seq == 0 and ts < te:
            w = bisect_right(ends, ts)  # the first word ending after the token starts
            if w < len(spans) and spans[w][0] < te:
                match = w
        result.append(match)
    return result


def _row_predictions(
    attentions: np.ndarray, unit_of_token: Sequence[int | None], unit_of_word: Sequence[int], rows: list[int],
    sink_aware: bool,
) -> np.ndarray:
    """`predictions(word_attention_matrix(...))[:, :, rows]` [L, H, len(rows)] for words whose tokens are
    those of their unit (`unit_of_word[w]`: the span it shares, a multi-word token's, or its own), computing
    only those rows and only the columns of words that have tokens, a block of rows at a time.

    The same predictions: a word without tokens has W == 0 in every row, and a prediction needs a
    maximum above 0, so such a column is never predicted. Words of one unit have the same row and column,
    so ties among them go to the lowest word index, as any tie. `sink_aware` drops word 0 and the words
    that share its span (the sink token's weight is in all of their columns)."""
    n_layers, n_heads = attentions.shape[:2]
    unit_of_word = np.asarray(unit_of_word, dtype=np.intp)
    has_unit = np.zeros(len(unit_of_word) and int(unit_of_word.max()) + 1, dtype=bool)
    has_unit[[u for u in unit_of_token if u is not None]] = True
    columns = np.flatnonzero(has_unit[unit_of_word]) if len(unit_of_word) else np.empty(0, np.intp)
    column_of = {int(w): k for k, w in enumerate(columns)}
    first_span = np.flatnonzero(unit_of_word == unit_of_word[0]) if sink_aware and len(unit_of_word) else []
    sink = [column_of[int(w)] for w in first_span if int(w) in column_of]
    out = np.empty((n_layers, n_heads, len(rows)), dtype=np.int64)
    step = _rows_per_block(n_layers, n_heads, len(columns), len(rows))
    n_units = len(has_unit)
    if n_units < len(unit_of_word):  # shared units: a block is computed once per unit, then copied; half as many
        step = max(1, step // 2)
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        block = word_attention_matrix(attentions, unit_of_token, n_units, np.float64, unit_of_word[part],
                                      unit_of_word[columns])
        block[:, :, np.arange(len(part)), [column_of[w] for w in part]] = -np.inf  # j != i
        if sink:
            block[..., sink] = -np.inf
        predicted = block.argmax(axis=-1)  # first index on ties, columns in word order
        best = np.take_along_axis(block, predicted[..., None], axis=-1)[..., 0]
        out[:, :, start : start + len(part)] = np.where(best > 0, columns[predicted], -1)
        del block, predicted, best  # one block of rows alive at a time
    return out


def _units(spans: Sequence[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """The distinct spans of an item's words, in order, and the unit of each word (the words of a
    multi-word token share one span, so one unit; every other word is a unit of its own)."""
    units: list[tuple[int, int]] = []
    unit_of_word: list[int] = []
    for span in spans:
        if not units or units[-1] != tuple(span):
            units.append(tuple(span))
        unit_of_word.append(len(units) - 1)
    return units, unit_of_word


def _rows_per_block(n_layers: int, n_heads: int, n_columns: int, n_rows: int) -> int:
    return max(1, min(n_rows, BLOCK_BYTES // max(1, 8 * n_layers * n_heads * n_columns)))


# Python objects per token and per word while scoring (the token -> word list, spans, sets), and a
# fixed allowance for the interpreter's and the allocator's own small allocations.
_PYTHON_BYTES_PER_TOKEN = 192
_PYTHON_BYTES_PER_WORD = 384
_SLACK_BYTES = 2 * 2**20


def scoring_peak_bytes(
    n_layers: int, n_heads: int, n_tokens: int, n_words: int, n_rows: int | None = None
) -> int:
    """Upper bound of the bytes `ScoreAccumulator.add` allocates (beyond the trace and the items) to
    score one trace of `n_tokens` tokens whose items have `n_words` words; `n_rows` is the number of
    distinct words read (sources and targets), default the worst case, every word with a token.

    Traces are scored one after another, so scoring a batch needs the largest of its traces' figure.
    Mirrors `_row_predictions` and `word_attention_matrix`: a block of rows [L, H, r, C] with its argmax,
    and per block of heads the query rows' tokens gathered (float32, then float64) and summed over the
    row words' tokens [h, r, T], then over the column words' tokens [h, r, C] (and its quotient), where
    C <= min(n_words, T) words have tokens."""
    n_columns = min(n_words, n_tokens)
    n_rows = n_columns if n_rows is None else min(n_rows, n_columns)
    python = _SLACK_BYTES + _PYTHON_BYTES_PER_TOKEN * n_tokens + _PYTHON_BYTES_PER_WORD * n_words
    if n_rows <= 0:
        return python
    rows = _rows_per_block(n_layers, n_heads, n_columns, n_rows)
    # the block's words hold at most the tokens the other words with tokens leave
    query = max(rows, n_tokens - (n_columns - rows))
    heads = min(n_heads, max(1, BLOCK_BYTES // max(1, 12 * query * n_tokens)))
    per_heads = heads * (12 * query * n_tokens + 8 * rows * n_tokens + 16 * rows * n_columns)
    row_block = n_layers * n_heads * rows * (8 * n_columns + 32)  # float64 block; argmax, best, where
    held = 8 * n_layers * n_heads * n_rows  # the predictions kept for the trace's items
    return int(python + row_block + per_heads + held)


def _word_map(
    trace: AttentionTrace,
    word_spans: Sequence[tuple[int, int]] | None,
    word_sequence: Sequence[int] | None = None,
) -> tuple[list[int | None], int, list[int]]:
    """(the unit of each token, the number of units, the unit of each word): the trace's own words (one unit
    a word), or the words at `word_spans`, where words of one span (a multi-word token) share a unit."""
    if word_spans is None:
        word_of_token = list(trace.word_of_token)
        known = [w for w in word_of_token if w is not None]
        n_words = max([len(trace.words), *(w + 1 for w in known)])
        return word_of_token, n_words, list(range(n_words))
    units, unit_of_word = _units(list(word_spans))
    sequence = None if word_sequence is None else [word_sequence[unit_of_word.index(u)] for u in range(len(units))]
    return align_tokens_to_words(trace.offsets, trace.sequence_ids, units, sequence), len(units), unit_of_word


def word_attention(
    trace: AttentionTrace,
    word_spans: Sequence[tuple[int, int]] | None = None,
    word_sequence: Sequence[int] | None = None,
    head: tuple[int, int] | None = None,
) -> np.ndarray:
    """W [L, H, n, n] of a trace: its own words, or the words at `word_spans` (character spans; words of
    one span share its tokens); with `head` = (layer, head), that head's alone, [1, 1, n, n] (every head
    of a 900-word item is 1.7 GB)."""
    unit_of_token, n_units, unit_of_word = _word_map(trace, word_spans, word_sequence)
    attentions = self_attentions(trace)
    if head is not None:
        attentions = attentions[head[0]:head[0] + 1, head[1]:head[1] + 1]
    if unit_of_word == list(range(n_units)):
        return word_attention_matrix(attentions, unit_of_token, n_units)
    return word_attention_matrix(attentions, unit_of_token, n_units, np.float64, unit_of_word, unit_of_word)


def predictions(word_attn: np.ndarray, sink_aware: bool = False, sink_words: int = 1) -> np.ndarray:
    """[L, H, n] int: each head's predicted word for every word i (argmax over j != i); -1 = none.

    `sink_aware` also drops word 0 from the candidates (the first token's attention sink), and with it the
    words that share its span (`sink_words` in all: a treebank's multi-word token at the start)."""
    n = word_attn.shape[-1]
    masked = word_attn.copy()
    masked[..., np.arange(n), np.arange(n)] = -np.inf
    if sink_aware:
        masked[..., :sink_words] = -np.inf
    predicted = masked.argmax(axis=-1)  # first index on ties
    best = np.take_along_axis(masked, predicted[..., None], axis=-1)[..., 0]
    return np.where(best > 0, predicted, -1)


def rank_heads(
    trace: AttentionTrace,
    source_word: int,
    target_word: int,
    word_spans: Sequence[tuple[int, int]] | None = None,
    word_sequence: Sequence[int] | None = None,
) -> list[tuple[int, int, float]]:
    """(layer, head, W[l, h, source, target]) for every head, largest weight first (ties: layer, head).

    Words are the trace's own (`trace.word_of_token`) unless `word_spans` gives character spans.
    """
    unit_of_token, _, unit_of_word = _word_map(trace, word_spans, word_sequence)
    n_words = len(unit_of_word)
    for name, word in (("source_word", source_word), ("target_word", target_word)):
        if not 0 <= word < n_words:
            raise ValueError(f"{name}={word} is out of range for {n_words} words")
    rows = [t for t, u in enumerate(unit_of_token) if u == unit_of_word[source_word]]
    cols = [t for t, u in enumerate(unit_of_token) if u == unit_of_word[target_word]]
    if not rows or not cols:
        raise ValueError("the source or target word has no token (truncated?)")
    attentions = self_attentions(trace)
    block = np.asarray(attentions[:, :, rows][:, :, :, cols], dtype=np.float64)  # [L, H, |rows|, |cols|]
    weights = block.sum(axis=-1).mean(axis=-1)  # [L, H]
    order = np.argsort(-weights, axis=None, kind="stable")
    n_heads = weights.shape[1]
    return [(int(k // n_heads), int(k % n_heads), float(weights.flat[k])) for k in order]


# ---------------------------------------------------------------------------------------------
# Accumulating scores


@dataclass
class _Counts:
    n: int = 0
    n_skipped: int = 0
    correct: dict[str, np.ndarray] = field(default_factory=dict)
    offsets: dict[str, Counter] = field(default_factory=lambda: {d: Counter() for d in DIRECTIONS})
    first_word: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))
    scorable: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))


class ScoreAccumulator:
    """Scores items trace by trace, so a long run need not keep every trace in memory.

    `add(trace, items)` takes the items of one trace (all run on the same text); W and the predictions
    are computed once per distinct word segmentation of that text. `sink_aware`: see the module doc.
    """

    def __init__(self, relations: Iterable[str] = (), sink_aware: bool = False) -> None:
        self._counts: dict[str, _Counts] = {}
        self._shape: tuple[int, int] | None = None
        self.sink_aware = bool(sink_aware)
        for relation in relations:
            self._relation(relation)

    def _relation(self, relation: str) -> _Counts:
        if relation not in self._counts:
            self._counts[relation] = _Counts()
        return self._counts[relation]

    def _check_shape(self, attentions: np.ndarray) -> None:
        shape = (int(attentions.shape[0]), int(attentions.shape[1]))
        if self._shape is None:
            self._shape = shape
        elif shape != self._shape:
            raise ValueError(f"traces disagree on (layers, heads): {self._shape} and {shape}")

    def add(self, trace: AttentionTrace, items: Iterable[ProbeItem]) -> None:
        attentions = self_attentions(trace)
        self._check_shape(attentions)
        causal = (trace.metadata or {}).get("causal") is True
        items = list(items)
        # Linear in the items' words: a text object is compared once, a words tuple hashed once (the
        # items of one CoNLL-U sentence share both), so a long sentence's n arcs cost n, not n².
        checked: set[int] = set()
        key_of: dict[tuple[int, int], tuple] = {}
        groups: dict[tuple, list[ProbeItem]] = {}
        for item in items:
            text = item.text
            if trace.texts and id(text) not in checked:
                if trace.texts[0] != text:
                    raise ValueError(
                        f"item {item.id or text!r} was scored with a trace of another text {trace.texts[0]!r}"
                    )
                checked.add(id(text))
            spans = item._spans
            by_id = (id(item.words), id(spans))
            if by_id not in key_of:
                key_of[by_id] = (item.words, spans)
            groups.setdefault(key_of[by_id], []).append(item)
        # W once per distinct word segmentation, only the rows its items read
        predicted_of: dict[tuple, tuple[np.ndarray, dict[int, int], set[int]]] = {}
        for key, group in groups.items():
            units, unit_of_word = _units(group[0].word_spans)
            unit_of_token = _align_to_sorted_words(trace.offsets, trace.sequence_ids, units)
            has_unit = {u for u in unit_of_token if u is not None}
            has_token = {w for w, u in enumerate(unit_of_word) if u in has_unit}
            rows = sorted({w for item in group for w in (item.source, item.target)} & has_token)
            predicted = (_row_predictions(attentions, unit_of_token, unit_of_word, rows, self.sink_aware)
                         if rows else np.empty((*attentions.shape[:2], 0), dtype=np.int64))
            predicted_of[key] = (predicted, {w: k for k, w in enumerate(rows)}, has_token)
        for item in items:
            predicted, row_of, has_token = predicted_of[key_of[(id(item.words), id(item._spans))]]
            counts = self._relation(item.relation)
            if item.source not in has_token or item.target not in has_token:
                counts.n_skipped += 1
                continue
            counts.n += 1
            for direction, read, gold in (
                ("source_to_target", item.source, item.target),
                ("target_to_source", item.target, item.source),
            ):
                if causal and gold > read:  # the read word's row cannot see a later word
                    continue
                counts.scorable[direction] += 1
                hit = predicted[:, :, row_of[read]] == gold  # [L, H]
                if direction in counts.correct:
                    counts.correct[direction] += hit
                else:
                    counts.correct[direction] = hit.astype(np.int64)
                counts.offsets[direction][gold - read] += 1
                counts.first_word[direction] += int(gold == 0)

    def result(self) -> dict[str, RelationScore]:
        shape = self._shape or (0, 0)
        return {relation: _finish(relation, counts, shape, self.sink_aware)
                for relation, counts in self._counts.items()}


def _finish(relation: str, counts: _Counts, shape: tuple[int, int], sink_aware: bool = False) -> RelationScore:
    accuracy, correct, best, baselines = {}, {}, {}, {}
    for direction in DIRECTIONS:
        hits = counts.correct.get(direction, np.zeros(shape, dtype=np.int64)).copy()
        correct[direction] = hits
        n_scorable = counts.scorable[direction]  # == counts.n unless a causal trace made items unscorable
        if n_scorable == 0:
            accuracy[direction] = np.full(shape, np.nan)
            best[direction] = None
            baselines[direction] = Baseline(None, None, None)
            continue
        accuracy[direction] = hits / n_scorable
        flat = int(np.argmax(hits))  # first max in row-major order
        layer, head = divmod(flat, shape[1])
        best[direction] = BestHead(layer, head, float(accuracy[direction][layer, head]))
        offset, offset_count = min(
            counts.offsets[direction].items(), key=lambda kc: (-kc[1], abs(kc[0]), kc[0])
        )
        baselines[direction] = Baseline(
            best_offset=int(offset),
            best_offset_accuracy=offset_count / n_scorable,
            first_word_accuracy=counts.first_word[direction] / n_scorable,
        )
    return RelationScore(relation, counts.n, counts.n_skipped, accuracy, correct, best, baselines,
                         n_scorable=dict(counts.scorable), sink_aware=sink_aware)


def score_items(
    traces: Sequence[AttentionTrace], items: Sequence[ProbeItem], sink_aware: bool = False
) -> dict[str, RelationScore]:
    """Score every item with its trace (`traces[k]` was run on `items[k].text`), grouped by relation.

    Relations come in order of first appearance in `items`. Pass the same trace object for items of
    the same sentence and W is computed once for all of them.
    """
    if len(traces) != len(items):
        raise ValueError(f"got {len(traces)} traces for {len(items)} items")
    groups: dict[int, tuple[AttentionTrace, list[ProbeItem]]] = {}
    for trace, item in zip(traces, items):
        groups.setdefault(id(trace), (trace, []))[1].append(item)
    accumulator = ScoreAccumulator((item.relation for item in items), sink_aware=sink_aware)
    for trace, group in groups.values():
        accumulator.add(trace, group)
    return accumulator.result()


# ---------------------------------------------------------------------------------------------
# JSON


def _number(value: float | None, digits: int = 4) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return round(float(value), digits)


def _grid(values: np.ndarray) -> list[list[float | None]]:
    return [[_number(v) for v in row] for row in values]


def to_json(model_name: str, scores: dict[str, RelationScore], sink_aware: bool | None = None) -> dict:
    """The docs/formats.md JSON: accuracies rounded to 4 decimals, layers and heads 0-based.

    A direction no item can be scored in (causal model) has `null` instead of a grid. `sink_aware`
    (top level) defaults to the scores' own option."""
    if sink_aware is None:
        sink_aware = any(score.sink_aware for score in scores.values())
    relations = {}
    for relation, score in scores.items():
        relations[relation] = {
            "n": int(score.n),
            "n_skipped": int(score.n_skipped),
            "source_to_target": None if score.impossible("source_to_target")
            else _grid(score.accuracy["source_to_target"]),
            "target_to_source": None if score.impossible("target_to_source")
            else _grid(score.accuracy["target_to_source"]),
            "best": {
                direction: None
                if best is None
                else {"layer": best.layer, "head": best.head, "accuracy": _number(best.accuracy)}
                for direction, best in ((d, score.best[d]) for d in DIRECTIONS)
            },
            "baselines": {
                direction: {
                    "best_offset": baseline.best_offset,
                    "best_offset_accuracy": _number(baseline.best_offset_accuracy),
                    "first_word_accuracy": _number(baseline.first_word_accuracy),
                }
                for direction, baseline in ((d, score.baselines[d]) for d in DIRECTIONS)
            },
            "n_scorable": {d: int(score.n_scorable.get(d, score.n)) for d in DIRECTIONS},
            "sink_aware": bool(score.sink_aware),
        }
    return {"model": model_name, "sink_aware": bool(sink_aware), "relations": relations}
