"""Score grids: one number per head, layers x heads (the Head Finder's probe accuracies, the head
detectors, the importance scan of head ablation), the best head outlined."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import resolve_colorscale
from attnviz.plots.shapes import rect
from attnviz.plots.text import ENGLISH, PlotText, escape_label


def score_grid(
    scores: np.ndarray,
    title: str,
    best: tuple[int, int] | None = None,
    zmin: float = 0,
    zmax: float = 1,
    colorscale: str | list = "default",
    text: PlotText = ENGLISH,
) -> go.Figure:
    """Layers x heads heatmap of a score (e.g. probe accuracy) with each value written in its cell.

    `best` (layer, head) is outlined; None outlines the highest score (first on ties, NaN ignored),
    so the head a reader should look at is found without scanning the numbers.
    """
    z = np.asarray(scores, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"scores must be [layers, heads], got shape {z.shape}")
    n_layers, n_heads = z.shape
    if best is None and not np.all(np.isnan(z)):
        best = tuple(int(v) for v in np.unravel_index(np.nanargmax(z), z.shape))
    fig = go.Figure(go.Heatmap(
        z=z, zmin=zmin, zmax=zmax, colorscale=resolve_colorscale(colorscale), texttemplate="%{z:.2f}",
        hovertemplate="L%{y} H%{x}<br>%{z:.3f}<extra></extra>", hoverongaps=False,
    ))
    shapes = []
    if best is not None:
        layer, head = best
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"best ({layer}, {head}) outside {n_layers} layers x {n_heads} heads")
        shapes.append(rect(head - 0.5, head + 0.5, layer - 0.5, layer + 0.5, name="best"))
    fig.update_layout(
        title=escape_label(title), shapes=shapes,
        height=int(min(1600, max(300, 26 * n_layers + 120))),
        xaxis={"tickmode": "array", "tickvals": list(range(n_heads)),
               "ticktext": [f"H{h}" for h in range(n_heads)], "showgrid": False, "title": text.head},
        yaxis={"tickmode": "array", "tickvals": list(range(n_layers)),
               "ticktext": [f"L{i}" for i in range(n_layers)], "showgrid": False, "title": text.layer,
               "autorange": "reversed"},
        meta={"best": list(best) if best is not None else None},
    )
    return fig
