"""The query-key view of one head and one query (attnviz.analysis.query_key): why one key wins, as the
positive and negative parts of each key's score and as the per-dimension products."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import BIAS_COLOR, NEGATIVE_COLOR, POSITIVE_COLOR
from attnviz.plots.text import escape_label, token_axis


def query_key_bars(
    positive: np.ndarray,
    negative: np.ndarray,
    scores: np.ndarray,
    probabilities: np.ndarray,
    key_labels: list[str],
    positions: list[int],
    words: dict[str, str] | None = None,
    bias: np.ndarray | None = None,
) -> go.Figure:
    """Per key: the positive and the negative parts of its pre-softmax score (sum of q[d] k[d] / sqrt(D)
    over the dimensions where the product is positive / negative) as bars from zero, the score itself as
    a marker, and the attention weight in the hover. `positions` are the keys' token indices (unique
    categories); `words` overrides the English names of the series ("positive", "negative", "score",
    "weight", "key", "bias"). `bias`, where the model adds a position term to the score (ALiBi), is a
    third bar stacked on the two, so the bars still add up to the score (before any soft-cap)."""
    w = {"positive": "positive q·k", "negative": "negative q·k", "score": "score", "weight": "weight",
         "key": "key", "bias": "position term"} | (words or {})
    x = [f"{p}:{escape_label(label)}" for p, label in zip(positions, key_labels)]
    weights = np.asarray(probabilities, dtype=np.float32)
    hover = f"%{{x}}<br>%{{y:.3f}}<br>{escape_label(w['weight'])} %{{customdata:.4f}}<extra>%{{fullData.name}}</extra>"
    fig = go.Figure()
    series = [("positive", positive, POSITIVE_COLOR), ("negative", negative, NEGATIVE_COLOR)]
    if bias is not None:
        series.append(("bias", bias, BIAS_COLOR))
    for name, values, color in series:
        fig.add_trace(go.Bar(x=x, y=np.asarray(values, np.float32), name=escape_label(w[name]),
                             marker_color=color, customdata=weights, hovertemplate=hover))
    fig.add_trace(go.Scatter(x=x, y=np.asarray(scores, np.float32), name=escape_label(w["score"]), mode="markers",
                             marker={"color": "#000000", "symbol": "diamond", "size": 9}, customdata=weights,
                             hovertemplate=hover))
    fig.update_layout(
        barmode="relative", height=360, margin={"t": 30, "b": 80},
        xaxis=token_axis(x, key_labels, title=escape_label(w["key"]), tickangle=-60),
        legend={"orientation": "h", "y": 1.12},
    )
    return fig


def query_key_products(
    products: np.ndarray,
    query: np.ndarray,
    keys: np.ndarray,
    key_labels: list[str],
    positions: list[int],
    words: dict[str, str] | None = None,
) -> go.Figure:
    """Keys x dimensions heatmap of q[d] k[d] / sqrt(D) on a diverging scale centred at 0 (blue
    positive, red negative, as the bars): which dimensions make a key win. The hover gives q[d] and
    k[d]. `words` overrides "dimension", "key" and "product"."""
    w = {"dimension": "dimension", "key": "key", "product": "q·k/√D"} | (words or {})
    p = np.asarray(products, dtype=np.float32)
    if p.shape != (len(key_labels), len(query)) or np.shape(keys) != p.shape:
        raise ValueError(f"products {p.shape}, keys {np.shape(keys)} and {len(key_labels)} labels x "
                         f"{len(query)} dimensions do not agree")
    y = [f"{pos}:{escape_label(label)}" for pos, label in zip(positions, key_labels)]
    parts = np.stack([np.broadcast_to(np.asarray(query, np.float32), p.shape), np.asarray(keys, np.float32)], -1)
    limit = float(np.abs(p).max(initial=0.0)) or 1.0
    fig = go.Figure(go.Heatmap(
        z=p, y=y, zmin=-limit, zmax=limit, zmid=0, colorscale=[[0, NEGATIVE_COLOR], [0.5, "#ffffff"],
                                                              [1, POSITIVE_COLOR]],
        customdata=parts, colorbar={"title": escape_label(w["product"])},
        hovertemplate=(f"{escape_label(w['key'])} %{{y}}<br>{escape_label(w['dimension'])} %{{x}}<br>"
                       "q %{customdata[0]:.3f} · k %{customdata[1]:.3f}<br>= %{z:.4f}<extra></extra>"),
    ))
    fig.update_layout(
        height=int(min(1600, max(260, 16 * p.shape[0] + 120))), margin={"t": 30},
        xaxis={"title": escape_label(w["dimension"]), "showgrid": False},
        yaxis=token_axis(y, key_labels, title=escape_label(w["key"]), autorange="reversed"),
    )
    return fig
