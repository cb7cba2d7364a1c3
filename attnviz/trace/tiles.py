"""The mosaic's tile format: how many cells a tile side gets for n tokens and which tokens each cell covers.

A reduced trace's `tiles` are pooled on these edges during the pass (attnviz.models.view_reductions) and the
full trace's maps after it (attnviz.plots.pooling.pool_tiles): one definition, so the two agree cell for cell."""

from __future__ import annotations

import numpy as np


def pooled_size(n: int, max_cells: int) -> int:
    """Cells one tile side gets for `n` tokens: the mosaic pools longer inputs so its size stays bounded."""
    if max_cells < 1:
        raise ValueError(f"max_cells must be >= 1, got {max_cells}")
    return min(n, max_cells)


def pool_edges(n: int, max_cells: int) -> np.ndarray:
    """Block boundaries [0, ..., n] splitting n tokens into `pooled_size` blocks of near-equal size.

    Blocks differ in size by at most one token, so all `max_cells` cells are used (fixed-size blocks
    would leave 200 tokens at 50 cells with 4-token blocks).
    """
    m = pooled_size(n, max_cells)
    return (np.arange(m + 1) * n) // m
