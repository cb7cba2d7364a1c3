"""The Atlas page's figures (HeadVis's head finder, Luger, Kamath et al. 2026): every head of a model as a point
on two of its metrics, coloured by a third, and one head's place in the model's distribution of each metric.
Inputs are plain [layer][head] grids (numbers or None, as `atlas.metrics` gives them); each point's customdata is
[layer, head] (plain ints: a click returns it, st.plotly_chart's selection), its hover "L3 H5" and the values.
The words the figures show come from the caller (the UI passes translated ones), escaped here."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.plots.colors import COLORSCALES, HIGHLIGHT_COLOR
from attnviz.plots.text import escape_label

MISSING_COLOR = "#bbbbbb"


def _value(grid, layer: int, head: int) -> float:
    try:
        value = grid[layer][head]
    except (IndexError, TypeError):
        return float("nan")
    return float(value) if isinstance(value, (int, float)) else float("nan")


def _number(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:.4g}"


def head_scatter(heads: list[tuple[int, int]], x_grid, y_grid, colour_grid, x_title: str, y_title: str,
                 colour_title: str, selected: tuple[int, int] | None = None, title: str = "") -> go.Figure:
    """One point per head of `heads` that has both an x and a y value; coloured by `colour_grid` (grey where a
    head has no value there). `selected` is ringed."""
    rows = [(layer, head, _value(x_grid, layer, head), _value(y_grid, layer, head), _value(colour_grid, layer, head))
            for layer, head in heads]
    rows = [row for row in rows if np.isfinite(row[2]) and np.isfinite(row[3])]
    x_name, y_name, c_name = escape_label(x_title), escape_label(y_title), escape_label(colour_title)

    def hover(layer, head, x, y, c) -> str:
        return (f"<b>L{layer} H{head}</b><br>{x_name}: {_number(x)}<br>{y_name}: {_number(y)}"
                f"<br>{c_name}: {_number(c)}")

    fig = go.Figure()
    coloured = [row for row in rows if np.isfinite(row[4])]
    grey = [row for row in rows if not np.isfinite(row[4])]
    for part, marker in ((coloured, {"color": np.asarray([r[4] for r in coloured], dtype=np.float32),
                                     "colorscale": COLORSCALES["default"], "showscale": True,
                                     "colorbar": {"title": c_name}}),
                         (grey, {"color": MISSING_COLOR})):
        if not part:
            continue
        fig.add_trace(go.Scatter(
            x=np.asarray([r[2] for r in part], dtype=np.float32), y=np.asarray([r[3] for r in part], dtype=np.float32),
            mode="markers", text=[hover(*r) for r in part], customdata=[[int(r[0]), int(r[1])] for r in part],
            hovertemplate="%{text}<extra></extra>", showlegend=False,
            marker={"size": 9, "opacity": 0.85, "line": {"width": 0.5, "color": "#444444"}, **marker}))
    picked = [row for row in rows if selected is not None and (row[0], row[1]) == tuple(selected)]
    if picked:
        r = picked[0]
        fig.add_trace(go.Scatter(
            x=[r[2]], y=[r[3]], mode="markers", text=[hover(*r)], customdata=[[int(r[0]), int(r[1])]],
            hovertemplate="%{text}<extra></extra>", showlegend=False,
            marker={"size": 18, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": HIGHLIGHT_COLOR}}))
    fig.update_layout(title=escape_label(title) if title else None, height=560, dragmode="zoom", margin={"t": 40},
                      xaxis={"title": x_name, "zeroline": False}, yaxis={"title": y_name, "zeroline": False},
                      meta={"points": len(rows)})
    return fig


def metric_strips(grids: dict, titles: dict, layer: int, head: int, head_label: str) -> go.Figure:
    """One row per metric of `grids` ({name: [layer][head]}): every head's value as a grey dot, the head
    (`layer`, `head`) as a large coloured one: where it sits in the model's distribution."""
    names = list(grids)
    fig = make_subplots(rows=len(names), cols=1, vertical_spacing=0.6 / max(len(names), 1),
                        subplot_titles=[escape_label(titles[name]) for name in names])
    for i, name in enumerate(names, start=1):
        grid = grids[name]
        values = [(a, b, _value(grid, a, b)) for a, row in enumerate(grid or []) for b in range(len(row))]
        values = [v for v in values if np.isfinite(v[2])]
        fig.add_trace(go.Scatter(
            x=np.asarray([v[2] for v in values], dtype=np.float32), y=np.zeros(len(values), dtype=np.float32),
            mode="markers", text=[f"L{a} H{b}: {_number(v)}" for a, b, v in values],
            hovertemplate="%{text}<extra></extra>", showlegend=False,
            marker={"size": 7, "color": MISSING_COLOR, "opacity": 0.7}), row=i, col=1)
        mine = _value(grid, layer, head)
        if np.isfinite(mine):
            fig.add_trace(go.Scatter(
                x=[mine], y=[0.0], mode="markers", text=[f"{escape_label(head_label)}: {_number(mine)}"],
                hovertemplate="%{text}<extra></extra>", showlegend=False,
                marker={"size": 14, "color": HIGHLIGHT_COLOR, "line": {"width": 1, "color": "#222222"}}), row=i, col=1)
        fig.update_yaxes(visible=False, row=i, col=1)
    fig.update_layout(height=105 * len(names) + 40, margin={"t": 30, "b": 10}, meta={"head": [layer, head]})
    return fig
