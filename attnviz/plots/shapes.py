"""Shapes drawn over a figure's cells: outlines of a tile or cell (a highlighted head, the best score)
and the dividers between the two sentences of an encoder pair."""

from __future__ import annotations

from attnviz.plots.colors import HIGHLIGHT_COLOR


def rect(x0: float, x1: float, y0: float, y1: float, yref: str = "y", **style) -> dict:
    """A rectangle shape in data coordinates (category axes take the cell index as a number)."""
    shape = {"type": "rect", "xref": "x", "yref": yref, "x0": x0, "x1": x1, "y0": y0, "y1": y1,
             "line": {"color": HIGHLIGHT_COLOR, "width": 3}}
    return shape | style


# A sentence divider is a black dash over a white line: one of the two stands out on every colour scale
# (viridis and cividis are dark at zero, blues is white there).
DIVIDER_LINES = ({"color": "#ffffff", "width": 4}, {"color": "#000000", "width": 1.5, "dash": "dash"})


def dividers(row: int | None, col: int | None, shape: tuple[int, int]) -> list[dict]:
    """Lines across the heatmap just before row `row` and column `col` (category axes count cells from 0);
    an index at either edge (or None) draws nothing."""
    shapes = []
    if row is not None and 0 < row < shape[0]:
        shapes += [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": row - 0.5,
                    "y1": row - 0.5, "line": line, "name": "divider rows"} for line in DIVIDER_LINES]
    if col is not None and 0 < col < shape[1]:
        shapes += [{"type": "line", "yref": "paper", "y0": 0, "y1": 1, "xref": "x", "x0": col - 0.5,
                    "x1": col - 0.5, "line": line, "name": "divider columns"} for line in DIVIDER_LINES]
    return shapes
