"""Minimal pairs: one head's attention difference between two sentences (A minus B), words x words."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import DIFFERENCE_COLORS
from attnviz.plots.text import ENGLISH, PlotText, escape_label, token_axis, unique_keys


def difference_heatmap(
    matrix: np.ndarray, labels: list[str], colorbar_title: str, text: PlotText = ENGLISH
) -> go.Figure:
    """A words x words difference of attention (sentence A minus sentence B), on a symmetric colour range
    [-m, m] around 0 so a sign reads the same in every head; NaN cells (a word one sentence lacks) are
    gaps. Labels are data (escaped, unique keys as in head_heatmap)."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape != (len(labels), len(labels)):
        raise ValueError(f"matrix shape {m.shape} does not match {len(labels)} x {len(labels)} labels")
    finite = np.abs(m[np.isfinite(m)])
    limit = float(max(finite.max() if finite.size else 0.0, 1e-3))
    keys = unique_keys(labels)
    fig = go.Figure(go.Heatmap(
        z=m, x=keys, y=keys, zmin=-limit, zmax=limit, zmid=0, colorscale=DIFFERENCE_COLORS, hoverongaps=False,
        colorbar={"title": escape_label(colorbar_title)},
        hovertemplate=f"{text.from_} %{{y}}<br>{text.to} %{{x}}<br>%{{z:+.4f}}<extra></extra>",
    ))
    fig.update_layout(
        height=int(min(2000, max(360, 16 * m.shape[0] + 160))),
        xaxis=token_axis(keys, labels, title=text.key_axis, tickangle=-60),
        yaxis=token_axis(keys, labels, title=text.query_axis, autorange="reversed"),
        meta={"limit": limit},
    )
    return fig
