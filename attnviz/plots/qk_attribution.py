"""Query-key attribution of one score (attnviz.readouts.qk_attribution): the query components x key
components matrix of its terms, grouped by layer, on a diverging scale centred at 0."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import NEGATIVE_COLOR, POSITIVE_COLOR
from attnviz.plots.text import escape_label

DIVIDER = {"color": "#888888", "width": 1}


def qk_attribution_heatmap(matrix: np.ndarray, row_labels: list[str], col_labels: list[str],
                           row_layers: list[int | None], col_layers: list[int | None],
                           words: dict[str, str] | None = None) -> go.Figure:
    """Rows: query-side components, columns: key-side components, cells: their term of the score (blue
    positive, red negative); a line wherever the layer changes along an axis (`row_layers`, `col_layers`:
    each label's layer, None for embeddings, biases and position terms). `words` overrides "query", "key"
    and "term"."""
    w = {"query": "query", "key": "key", "term": "term"} | (words or {})
    z = np.asarray(matrix, dtype=np.float32)
    if z.shape != (len(row_labels), len(col_labels)) or len(row_layers) != z.shape[0] or len(col_layers) != z.shape[1]:
        raise ValueError(f"matrix {z.shape}, {len(row_labels)} x {len(col_labels)} labels and "
                         f"{len(row_layers)} x {len(col_layers)} layers do not agree")
    rows, cols = [escape_label(label) for label in row_labels], [escape_label(label) for label in col_labels]
    limit = float(np.abs(z).max(initial=0.0)) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, zmin=-limit, zmax=limit, zmid=0, colorscale=[[0, NEGATIVE_COLOR], [0.5, "#ffffff"], [1, POSITIVE_COLOR]],
        colorbar={"title": escape_label(w["term"])},
        hovertemplate=(f"{escape_label(w['query'])} %{{y}}<br>{escape_label(w['key'])} %{{x}}<br>"
                       "%{z:.4f}<extra></extra>"),
    ))
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": i - 0.5, "x1": i - 0.5, "y0": 0, "y1": 1,
               "line": DIVIDER} for i in _changes(col_layers)]
    shapes += [{"type": "line", "xref": "paper", "yref": "y", "y0": i - 0.5, "y1": i - 0.5, "x0": 0, "x1": 1,
                "line": DIVIDER} for i in _changes(row_layers)]
    size = max(z.shape)
    fig.update_layout(
        height=int(min(1600, max(320, 12 * z.shape[0] + 160))), margin={"t": 30}, shapes=shapes,
        xaxis={"title": escape_label(w["key"]), "tickmode": "array", "tickvals": list(range(len(cols))),
               "ticktext": cols, "showgrid": False, "tickfont": {"size": 9 if size > 40 else 11}},
        yaxis={"title": escape_label(w["query"]), "tickmode": "array", "tickvals": list(range(len(rows))),
               "ticktext": rows, "showgrid": False, "autorange": "reversed",
               "tickfont": {"size": 9 if size > 40 else 11}},
    )
    return fig


def qk_attribution_figure(split, grouped: bool = False, words: dict[str, str] | None = None) -> go.Figure:
    """The heatmap of a `QKAttribution` (attnviz.readouts.qk_attribution) as the notebook draws it: its
    `table(grouped)`, labelled by component name, every term included (position terms as rows or columns)."""
    rows, columns, matrix = split.table(grouped)
    return qk_attribution_heatmap(matrix, rows, columns, split.layers(rows), split.layers(columns), words)


def _changes(layers: list[int | None]) -> list[int]:
    """Indices where the layer differs from the one before (a divider goes before them)."""
    return [i for i in range(1, len(layers)) if layers[i] != layers[i - 1]]
