"""Pooling of long inputs: the pooled weights and their labels, on the tile edges of attnviz.trace.tiles (where
`pool_edges` is defined, as the reduced pass pools on them too), and the float mosaic of all heads (tiles,
mean row and column, gaps) that `model_view` draws."""

from __future__ import annotations

import itertools
import math

import numpy as np

from attnviz.plots.text import escape_label
from attnviz.trace.tiles import pool_edges


def pool_tiles(a: np.ndarray, max_cells: int) -> np.ndarray:
    """Pool the last two axes (query rows, key columns) to at most `max_cells` blocks each: the mean over
    a block's rows of the sum over its columns.

    Each pooled row of an attention map still sums to 1, so a sharp pattern keeps its brightness: a
    previous-token diagonal at 512 tokens pooled 8:1 shows ~0.9 on the diagonal blocks, where block
    means would dilute it to ~0.1. Pooling is linear, so means over heads or layers commute with it.
    Computed one leading index at a time in float32 (a float16 or float32 input of any size is never
    copied whole). Returns float32.
    """
    a = np.asarray(a)
    n_rows, n_cols = a.shape[-2:]
    rows, cols = pool_edges(n_rows, max_cells), pool_edges(n_cols, max_cells)
    row_sizes = np.diff(rows).astype(np.float32)[:, None]
    lead = a.shape[:-2]
    flat = a.reshape(-1, n_rows, n_cols)
    out = np.empty((flat.shape[0], len(rows) - 1, len(cols) - 1), dtype=np.float32)
    for k, matrix in enumerate(flat):
        summed = np.add.reduceat(np.asarray(matrix, dtype=np.float32), cols[:-1], axis=-1)
        out[k] = np.add.reduceat(summed, rows[:-1], axis=-2) / row_sizes
    return out.reshape(*lead, len(rows) - 1, len(cols) - 1)


# uint8 cells of the mosaic: ~0.55 MB once base64-encoded, whatever the model, so that a whole rerun
# (mosaic, head detail, 512 token chips) sends under 1 MB.
MOSAIC_CELLS = 400_000


def tile_cells(n_layers: int, n_heads: int, limit: int = 64) -> int:
    """Cells per tile side so that the whole mosaic (with its mean row and column) stays within
    MOSAIC_CELLS: 64 (the most) for MiniLM's 6 x 12 heads, 47 for BERT-base's 12 x 12, 34 for SmolLM2's 30 x 9."""
    return max(8, min(limit, math.isqrt(MOSAIC_CELLS // ((n_layers + 1) * (n_heads + 1))) - 1))


def pooled_labels(labels: list[str], max_cells: int) -> list[str]:
    """One label per pooled cell: "5:the" for a single token, "4–7:the…dog" for a block."""
    edges = pool_edges(len(labels), max_cells)
    result = []
    for start, stop in itertools.pairwise(edges):
        first = escape_label(labels[start])
        if stop - start == 1:
            result.append(f"{start}:{first}")
        else:
            result.append(f"{start}–{stop - 1}:{first}…{escape_label(labels[stop - 1])}")
    return result


def mosaic(attentions: np.ndarray, max_cells: int = 64, head_order: list[int] | None = None,
           head_mean: bool = True) -> np.ndarray:
    """Float32 mosaic of all heads: tile (l, h) at rows l*(t+1).., columns h*(s+1).., NaN gaps.

    Shape ((L+1)*(t+1)-1, (H+1)*(s+1)-1) with t, s = pooled_size(T), pooled_size(S): the extra tile
    column is the mean over heads of each layer, the extra tile row the mean over layers of each head
    (and of the head means: the grand mean in the corner). Heads appear in `head_order` if given.
    Without `head_mean` there is no mean column (H columns of tiles): one map per layer (rollout, flow)
    would repeat itself as its own mean.
    """
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [layers, heads, T, S], got shape {a.shape}")
    return mosaic_of_tiles(pool_tiles(a, max_cells), head_order, head_mean)


def mosaic_of_tiles(tiles: np.ndarray, head_order: list[int] | None = None, head_mean: bool = True) -> np.ndarray:
    """`mosaic` from tiles already pooled [L, H, t, s] (a reduced trace's `view_tiles`, a long text's)."""
    tiles = np.asarray(tiles, dtype=np.float32)
    if head_order is not None:
        tiles = tiles[:, list(head_order)]
    _, _, t, s = tiles.shape
    if head_mean:
        tiles = np.concatenate([tiles, tiles.mean(axis=1, keepdims=True)], axis=1)  # [L, H+1, t, s]
    tiles = np.concatenate([tiles, tiles.mean(axis=0, keepdims=True)], axis=0)  # [L+1, H+1, t, s]
    padded = np.full((tiles.shape[0], t + 1, tiles.shape[1], s + 1), np.nan, np.float32)
    padded[:, :t, :, :s] = tiles.transpose(0, 2, 1, 3)  # [L+1, t, H+1, s]
    rows, cols = padded.shape[0] * (t + 1), padded.shape[2] * (s + 1)
    return padded.reshape(rows, cols)[:-1, :-1]
