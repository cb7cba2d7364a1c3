"""Which tile cell each token's attention pools into, for each view of the Explore page's mosaic (the token view,
with special tokens hidden, the word view, and a decoder's views with the first token set aside): a `Pooling`
each, which attnviz.models.view_reductions.MosaicTiles adds up as the reduced pass runs. Cells follow the tile
edges of attnviz.trace.tiles, as plots.pooling.pool_tiles of the full view's map does."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnviz.trace import pool_edges


@dataclass(frozen=True)
class Pooling:
    """How one view pools token attention into tiles: row i, times `row_weight[i]`, adds into tile row
    `row_cell[i]`, and its column j into tile column `col_cell[j]`; a cell of -1 leaves the token out.
    `renormalise`: each row is first divided by its weight on the columns kept (0 when it has none), as the
    token view with special tokens hidden does; or on `norm_cols` when given (the word view with the first
    token set aside renormalises over every column but the first, words or not)."""

    row_cell: np.ndarray  # [T] int
    row_weight: np.ndarray  # [T] float64
    col_cell: np.ndarray  # [S] int
    n_rows: int
    n_cols: int
    renormalise: bool = False
    norm_cols: np.ndarray | None = None  # [S] bool: the columns a row is renormalised over (default: those kept)


def _cells(n: int, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of n items' cell, and each cell's size."""
    edges = pool_edges(n, cells)
    sizes = np.diff(edges)
    return np.repeat(np.arange(len(sizes)), sizes), sizes


def token_pooling(n: int, cells: int) -> Pooling:
    """pool_tiles of the token view: the mean over a block's rows of the sum over its columns."""
    cell, sizes = _cells(n, cells)
    return Pooling(cell, 1.0 / sizes[cell], cell, len(sizes), len(sizes))


def hidden_special_pooling(special: np.ndarray, cells: int) -> Pooling:
    """pool_tiles of attention_view(hide_special=True): special rows and columns dropped, rows renormalised."""
    keep = np.flatnonzero(~special)
    cell, sizes = _cells(keep.size, cells)
    row_cell = np.full(special.size, -1)
    row_cell[keep] = cell
    weight = np.zeros(special.size)
    weight[keep] = 1.0 / sizes[cell]
    return Pooling(row_cell, weight, row_cell, len(sizes), len(sizes), renormalise=True)


def word_pooling(word_of_token, cells: int) -> Pooling:
    """pool_tiles of attention_view(level="word"): the words that kept a token, each word's row the mean over
    its tokens of the sum over the column word's tokens (analysis.scoring.word_attention_matrix)."""
    kept = sorted({w for w in word_of_token if w is not None})
    index = {w: k for k, w in enumerate(kept)}
    word = np.asarray([-1 if w is None else index[w] for w in word_of_token])
    counts = np.bincount(word[word >= 0], minlength=len(kept))
    cell_of_word, sizes = _cells(len(kept), cells)
    row_cell = np.where(word >= 0, cell_of_word[np.maximum(word, 0)], -1)
    weight = np.where(word >= 0, 1.0 / (counts[np.maximum(word, 0)] * sizes[cell_of_word[np.maximum(word, 0)]]), 0)
    return Pooling(row_cell, weight, row_cell, len(sizes), len(sizes))


def first_aside_word_pooling(word_of_token, cells: int) -> Pooling:
    """pool_tiles of the word view with the first token set aside (analysis.sink.trace_first_aside): rows
    renormalised over every column but the first, and the first token in no word."""
    pooling = word_pooling([None, *word_of_token[1:]], cells)
    norm_cols = np.ones(len(word_of_token), dtype=bool)
    norm_cols[0] = False
    return dataclasses.replace(pooling, renormalise=True, norm_cols=norm_cols)


def view_poolings(n: int, cells: int, special: np.ndarray, word_of_token, first_aside: bool = False
                  ) -> dict[str, Pooling]:
    """The poolings the Explore page's options need: "token", "token_hide_special" (when there are special
    tokens and a real one), "word" (when a token has a word); with `first_aside` (a decoder's), the same
    views with the first token set aside, named with "_first_aside" (the token view then hides position 0,
    and the real special tokens only in "token_hide_special_first_aside")."""
    special = np.asarray(special, bool)
    poolings = {"token": token_pooling(n, cells)}
    if special.any() and not special.all():
        poolings["token_hide_special"] = hidden_special_pooling(special, cells)
    has_words = any(w is not None for w in word_of_token)
    if has_words:
        poolings["word"] = word_pooling(word_of_token, cells)
    if first_aside and n > 1:
        first = np.zeros(n, dtype=bool)
        first[0] = True
        poolings["token_first_aside"] = hidden_special_pooling(first, cells)
        if (special & ~first).any() and not (special | first).all():
            poolings["token_hide_special_first_aside"] = hidden_special_pooling(special | first, cells)
        if any(w is not None for w in word_of_token[1:]):
            poolings["word_first_aside"] = first_aside_word_pooling(list(word_of_token), cells)
    return poolings
