"""Sentence pairs as bertviz shows them: which sentence each row/column of a view belongs to, and the
A->B, B->A, A->A, B->B slices of one head's map.

An encoder given two sentences reads "[CLS] A [SEP] B [SEP]" (RoBERTa: "<s> A </s></s> B </s>"). Special
tokens belong to no sentence (`trace.sequence_ids` is None for them). bertviz splits the input at one
index, `sentence_b_start`: everything before the first token of B is A, everything from it on is B. We
follow it, so [CLS] and the first [SEP] go with A and the last [SEP] with B, and a filter never drops a
position. The filter only selects rows (queries) and columns (keys); it does not renormalise, so a cell
shows the same weight under every filter, as in bertviz.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnviz.analysis.profile import special_tokens
from attnviz.trace import AttentionTrace

A, B = 0, 1
# (row sentence, column sentence) per filter; None = every position.
PAIR_FILTERS: dict[str, tuple[int | None, int | None]] = {
    "all": (None, None), "ab": (A, B), "ba": (B, A), "aa": (A, A), "bb": (B, B),
}
LINE_DIRECTIONS = ("out", "in", "both")  # from the token (its row), to the token (its column), both


def label_sentences(sequence: Sequence[int | None]) -> list[int]:
    """A (0) or B (1) for each position, given 0 / 1 / None (no sentence) per position: positions before the
    first B position are A, the rest are B (bertviz's `sentence_b_start` split)."""
    first_b = next((i for i, s in enumerate(sequence) if s == B), len(sequence))
    return [A if i < first_b else B for i in range(len(sequence))]


def view_sequence(trace: AttentionTrace, level: str = "token", hide_special: bool = False) -> list[int | None]:
    """The sentence (0, 1, None) of each label of `attention_view(trace, level, hide_special)`, keeping the
    same positions that view keeps: every token; the tokens that are not special; the words that kept a
    token (sorted, as the word view orders them)."""
    if level == "word":
        kept = sorted({w for w in trace.word_of_token if w is not None})
        sequence = trace.word_sequence or [A] * len(trace.words)
        return [sequence[w] for w in kept]
    if level != "token":
        raise ValueError(f"level must be 'token' or 'word', got {level!r}")
    if hide_special:
        return [trace.sequence_ids[i] for i in np.flatnonzero(~special_tokens(trace))]
    return list(trace.sequence_ids)


def is_pair(sides: Sequence[int]) -> bool:
    """Both sentences present (after `label_sentences`): the filters mean something."""
    return A in sides and B in sides


def pair_indices(sides: Sequence[int], pair: str) -> tuple[np.ndarray, np.ndarray]:
    """Row (query) and column (key) positions that `pair` keeps, in order: `matrix[np.ix_(rows, cols)]`."""
    if pair not in PAIR_FILTERS:
        raise ValueError(f"pair must be one of {sorted(PAIR_FILTERS)}, got {pair!r}")
    side = np.asarray(sides, dtype=np.int64)
    everything = np.arange(side.size)
    row_side, col_side = PAIR_FILTERS[pair]
    rows = everything if row_side is None else np.flatnonzero(side == row_side)
    cols = everything if col_side is None else np.flatnonzero(side == col_side)
    return rows, cols


def divider(sides: Sequence[int]) -> int | None:
    """Index of the first B position when both sentences are present (the divider sits just before it),
    else None. Sentences are contiguous, so one index splits them."""
    return sides.index(B) if is_pair(sides) else None


def focus_lines(position: int | None, rows: Sequence[int], cols: Sequence[int],
                direction: str) -> tuple[int | None, int | None]:
    """Where the focused token (a position of the unfiltered view) sits among the kept rows and columns,
    for the line view: (its row, for outgoing lines; its column, for incoming lines), each None when the
    direction does not ask for it or the filter dropped it."""
    if direction not in LINE_DIRECTIONS:
        raise ValueError(f"direction must be one of {LINE_DIRECTIONS}, got {direction!r}")
    if position is None:
        return None, None
    rows, cols = list(rows), list(cols)
    row = rows.index(position) if direction in ("out", "both") and position in rows else None
    col = cols.index(position) if direction in ("in", "both") and position in cols else None
    return row, col


@dataclass(frozen=True)
class PairSlice:
    """What one head's figures draw under a filter: `matrix[np.ix_(rows, cols)]` with these labels, the
    dividers (first B row / column, None when a side holds one sentence) and the focused token's row and
    column for the line view."""

    rows: np.ndarray
    cols: np.ndarray
    row_labels: list[str]
    col_labels: list[str]
    row_divider: int | None
    col_divider: int | None
    focus_row: int | None
    focus_col: int | None

    def take(self, matrix: np.ndarray) -> np.ndarray:
        return np.asarray(matrix)[np.ix_(self.rows, self.cols)]


def slice_pair(sides: Sequence[int], labels: Sequence[str], pair: str = "all", focus: int | None = None,
               direction: str = "out") -> PairSlice:
    """The rows and columns `pair` keeps of a square view whose positions lie in sentences `sides`
    (`label_sentences`), with `focus` a position of that view and `direction` the lines to draw for it."""
    if len(sides) != len(labels):
        raise ValueError(f"{len(sides)} sentence marks for {len(labels)} labels")
    rows, cols = pair_indices(sides, pair)
    focus_row, focus_col = focus_lines(focus, rows, cols, direction)
    return PairSlice(rows, cols, [labels[i] for i in rows], [labels[j] for j in cols],
                     divider([sides[i] for i in rows]), divider([sides[j] for j in cols]), focus_row, focus_col)
