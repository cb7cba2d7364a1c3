"""The Atlas dashboard's small figures of one head (HeadVis's custom plots) and of a published atlas beside ours:
the max-activation histogram (sequences per bin of their max), the attention mass per |q - k| bin, and one scatter
per metric of our value against the published one over every head. Inputs are plain numbers and [layer][head]
grids; every word comes from the caller (the UI passes translated ones) and is escaped here."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.plots.atlas import MISSING_COLOR
from attnviz.plots.colors import HIGHLIGHT_COLOR
from attnviz.plots.text import escape_label

BAR_COLOR = "#4c78a8"
SMALL = {"height": 260, "margin": {"t": 40, "b": 40, "l": 50, "r": 10}, "bargap": 0.05}


def max_histogram(edges, counts, title: str, x_title: str, y_title: str) -> go.Figure:
    """Sequences per bin of their max weight (bins of [0, 1] by `edges`)."""
    edges = np.asarray(edges, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    centres, widths = (edges[1:] + edges[:-1]) / 2, np.diff(edges)
    y_name = escape_label(y_title)
    fig = go.Figure(go.Bar(x=centres, y=counts, width=widths, marker={"color": BAR_COLOR},
                           hovertemplate=f"%{{x:.2f}}: %{{y:d}} {y_name}<extra></extra>"))
    fig.update_layout(title=escape_label(title), xaxis={"title": escape_label(x_title), "range": [0, 1]},
                      yaxis={"title": y_name}, meta={"bins": len(counts), "total": int(counts.sum())}, **SMALL)
    return fig


def distance_labels(edges) -> list[str]:
    """Each |q - k| bin as its distances: "0", "1", "2–3", ..., "2048–4095"."""
    edges = [int(e) for e in edges]
    return [str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b in zip(edges[:-1], edges[1:])]


def qk_distance_histogram(edges, mass, title: str, x_title: str, y_title: str) -> go.Figure:
    """The share of the head's attention mass per |q - k| bin; bins past the last with any mass left out (a
    corpus of short texts has none at 2,048)."""
    labels = distance_labels(edges)
    mass = np.asarray(mass, dtype=np.float64)
    nonzero = np.flatnonzero(mass > 0)
    keep = max(int(nonzero[-1]) + 1 if len(nonzero) else 0, min(4, len(mass)))
    total = float(mass.sum())
    share = mass[:keep] / total if total > 0 else mass[:keep]
    y_name = escape_label(y_title)
    fig = go.Figure(go.Bar(x=labels[:keep], y=share, marker={"color": BAR_COLOR},
                           hovertemplate=f"|q − k| %{{x}}: %{{y:.3f}} {y_name}<extra></extra>"))
    fig.update_layout(title=escape_label(title), xaxis={"title": escape_label(x_title), "type": "category"},
                      yaxis={"title": y_name, "range": [0, 1]}, meta={"bins": keep}, **SMALL)
    return fig


def _pairs(ours, theirs) -> list[tuple[int, int, float, float]]:
    """(layer, head, ours, theirs) of every head that has a number in both grids."""
    pairs = []
    for layer, row in enumerate(ours or []):
        for head, mine in enumerate(row):
            try:
                other = theirs[layer][head]
            except (IndexError, TypeError):
                continue
            if isinstance(mine, (int, float)) and isinstance(other, (int, float)):
                pairs.append((layer, head, float(mine), float(other)))
    return pairs


def metric_agreement(ours: dict, theirs: dict, titles: dict, x_title: str, y_title: str,
                     selected: tuple[int, int] | None = None, columns: int = 3) -> go.Figure:
    """One scatter per metric of `ours` ({name: [layer][head]}) and `theirs`: a point per head with both values
    (our value across, the published one up), the diagonal where they agree, `selected` in orange."""
    names = [name for name in ours if name in theirs]
    rows = max(1, -(-len(names) // columns))
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[escape_label(titles[name]) for name in names],
                        horizontal_spacing=0.08, vertical_spacing=0.22)
    x_name, y_name = escape_label(x_title), escape_label(y_title)
    points = 0
    for i, name in enumerate(names):
        row, col = i // columns + 1, i % columns + 1
        pairs = _pairs(ours[name], theirs[name])
        points += len(pairs)
        if pairs:
            low = min(min(p[2], p[3]) for p in pairs)
            high = max(max(p[2], p[3]) for p in pairs)
            fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", hoverinfo="skip", showlegend=False,
                                     line={"color": MISSING_COLOR, "dash": "dot", "width": 1}), row=row, col=col)
        for part, marker in (([p for p in pairs if (p[0], p[1]) != selected], {"size": 6, "color": BAR_COLOR,
                                                                                "opacity": 0.7}),
                             ([p for p in pairs if (p[0], p[1]) == selected], {"size": 12, "color": HIGHLIGHT_COLOR,
                                                                               "line": {"width": 1,
                                                                                        "color": "#222222"}})):
            if not part:
                continue
            fig.add_trace(go.Scatter(
                x=np.asarray([p[2] for p in part], dtype=np.float32),
                y=np.asarray([p[3] for p in part], dtype=np.float32), mode="markers", showlegend=False,
                customdata=[[p[0], p[1]] for p in part], marker=marker,
                hovertemplate=(f"L%{{customdata[0]}} H%{{customdata[1]}}<br>{x_name}: %{{x:.4f}}"
                               f"<br>{y_name}: %{{y:.4f}}<extra></extra>")), row=row, col=col)
        fig.update_xaxes(title={"text": x_name, "font": {"size": 11}}, row=row, col=col)
        fig.update_yaxes(title={"text": y_name, "font": {"size": 11}}, row=row, col=col)
    fig.update_layout(height=290 * rows + 40, margin={"t": 40, "b": 30}, meta={"points": points, "metrics": names})
    return fig
