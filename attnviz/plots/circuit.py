"""A circuit of heads and MLPs as a graph (attnviz.interventions.circuit): nodes laid out by layer (x: the
embedding, L0 .. L{L-1}, the logits; y: the layer's heads H0 .. H{H-1}, then its MLP), each labelled as the rest of
the app labels it ("embed", "L26 H0", "MLP 3", "logits"); edges as lines whose width grows with |score| and whose
colour is its sign (blue carries the clean behaviour, vermillion opposes it), with the edge's score on hover at its
middle. The labels are data: they pass through `escape_label` like every label that came from text."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import NEGATIVE_COLOR, POSITIVE_COLOR
from attnviz.plots.text import ENGLISH, PlotText, escape_label

WIDTHS = (0.6, 1.4, 2.4, 3.6, 5.0)  # line widths by |score| fifth of the largest: one trace per width and sign
NODE_COLOR = "#444444"


def circuit_graph(labels: list[str], layers: list[int], rows: list[float], edges: list[tuple[int, int]],
                  scores, n_layers: int, n_heads: int, title: str, score_label: str = "score",
                  text: PlotText = ENGLISH, ends: tuple[str, str] = ("embed", "logits")) -> go.Figure:
    """labels, layers, rows: every node's label, layer (-1 the embedding, n_layers the logits) and row (a head's
    index, n_heads for an MLP); edges: (source, receiver) indices into them; scores [E]; ends: the first and last
    columns' ticks (the embedding's and the logits' words). Only the nodes an edge touches are drawn."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(edges) != scores.size:
        raise ValueError(f"{len(edges)} edges and {scores.size} scores")
    if not (len(labels) == len(layers) == len(rows)):
        raise ValueError("labels, layers and rows must describe the same nodes")
    fig = go.Figure()
    largest = float(np.abs(scores).max()) if scores.size else 1.0
    largest = largest if largest > 0 else 1.0
    bins = np.minimum((np.abs(scores) / largest * len(WIDTHS)).astype(int), len(WIDTHS) - 1)
    for sign, color in ((1, POSITIVE_COLOR), (-1, NEGATIVE_COLOR)):
        for level, width in enumerate(WIDTHS):
            chosen = [i for i in range(len(edges)) if bins[i] == level and (scores[i] >= 0) == (sign > 0)]
            if not chosen:
                continue
            xs, ys = [], []
            for i in chosen:
                u, v = edges[i]
                xs += [layers[u], layers[v], None]
                ys += [rows[u], rows[v], None]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"width": width, "color": color},
                                     opacity=0.75, hoverinfo="skip", showlegend=False))
    # The edges' hover: a marker at each edge's middle (a line has none of its own), invisible until hovered.
    middles = [((layers[u] + layers[v]) / 2, (rows[u] + rows[v]) / 2) for u, v in edges]
    fig.add_trace(go.Scatter(
        x=[m[0] for m in middles], y=[m[1] for m in middles], mode="markers", marker={"size": 8, "opacity": 0},
        customdata=np.array([[escape_label(labels[u]), escape_label(labels[v])] for u, v in edges], dtype=object)
        if edges else None, text=[f"{s:+.3f}" for s in scores], showlegend=False,
        hovertemplate=f"%{{customdata[0]}} → %{{customdata[1]}}<br>{escape_label(score_label)} %{{text}}"
                      "<extra></extra>"))
    drawn = sorted({node for edge in edges for node in edge})
    shown = [escape_label(labels[i]) for i in drawn]
    fig.add_trace(go.Scatter(
        x=[layers[i] for i in drawn], y=[rows[i] for i in drawn], mode="markers+text", text=shown,
        textposition="top center", textfont={"size": 10},
        marker={"size": 9, "color": NODE_COLOR, "line": {"width": 1, "color": "#ffffff"}}, showlegend=False,
        hovertemplate="%{text}<extra></extra>"))
    x_ticks = list(range(-1, n_layers + 1))
    x_text = [escape_label(ends[0])] + [f"L{layer}" for layer in range(n_layers)] + [escape_label(ends[1])]
    y_ticks = list(range(n_heads + 1))
    y_text = [f"H{head}" for head in range(n_heads)] + ["MLP"]
    fig.update_layout(
        title=escape_label(title), height=int(min(1000, max(360, 34 * (n_heads + 1) + 160))),
        xaxis={"title": text.layer, "tickmode": "array", "tickvals": x_ticks, "ticktext": x_text,
               "range": [-1.6, n_layers + 0.6], "showgrid": False, "zeroline": False},
        yaxis={"title": text.head, "tickmode": "array", "tickvals": y_ticks, "ticktext": y_text,
               "range": [n_heads + 0.8, -0.8], "showgrid": False, "zeroline": False},
        meta={"edges": len(edges), "nodes": len(drawn), "largest": largest}, plot_bgcolor="rgba(0,0,0,0)")
    return fig
