"""Figures of the logit lens, direct logit attribution and information-flow routes (attnviz.interventions),
from plain arrays and lists: the layers x positions picture of top-1 tokens, a target's rank and probability
across reads, one value per layer (the MLPs' attributions), and the routes drawn layer by layer.

Every token label goes through `escape_label`; a routes head node carries (layer, head) in customdata, as a
score grid's cells do, so a click on it opens that head."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import DIFFERENCE_COLORS, HIGHLIGHT_COLOR
from attnviz.plots.text import ENGLISH, PlotText, escape_label, unique_keys


def lens_grid(grid_texts: list[list[str]], grid_probs: np.ndarray, tokens: list[str], title: str,
              text: PlotText = ENGLISH, embed: str = "embed") -> go.Figure:
    """Rows: the embeddings (labelled `embed`), then each block's output; columns: the text's positions; each
    cell the top-1 token read there, coloured by its probability."""
    z = np.asarray(grid_probs, dtype=np.float32)
    rows = [escape_label(embed)] + [f"L{layer}" for layer in range(z.shape[0] - 1)]
    keys = unique_keys(tokens)
    cells = [[escape_label(cell) for cell in row] for row in grid_texts]
    printed = z.shape[1] <= 40
    fig = go.Figure(go.Heatmap(
        z=z, x=keys, y=rows, zmin=0, zmax=1, colorscale="Blues", text=cells,
        texttemplate="%{text}" if printed else "", textfont={"size": 10},
        hovertemplate="%{y} · %{x}<br>%{text}: %{z:.3f}<extra></extra>", colorbar={"title": "p"}))
    fig.update_layout(title=escape_label(title), height=int(min(1600, max(320, 22 * z.shape[0] + 140))),
                      xaxis={"tickmode": "array", "tickvals": keys, "ticktext": [escape_label(t) for t in tokens],
                             "showgrid": False} if len(keys) <= 100 else {"showgrid": False},
                      yaxis={"title": text.layer, "showgrid": False})
    return fig


def target_curve(labels: list[str], ranks: np.ndarray, probs: np.ndarray, target: str, title: str,
                 rank: str = "rank") -> go.Figure:
    """The target token's probability (left axis) and rank (right axis, log, 1 = the top token) at every read
    (`labels`, shown as given: the caller's words)."""
    fig = go.Figure()
    shown = [escape_label(label) for label in labels]
    fig.add_trace(go.Scatter(x=shown, y=np.asarray(probs, dtype=np.float64), mode="lines+markers",
                             name=f"p({escape_label(target)})"))
    fig.add_trace(go.Scatter(x=shown, y=np.asarray(ranks, dtype=np.int64) + 1, mode="lines", yaxis="y2",
                             name=escape_label(rank), line={"dash": "dot"}))
    fig.update_layout(title=escape_label(title), height=340, xaxis={"type": "category", "automargin": True},
                      yaxis={"title": "p", "range": [0, 1]},
                      yaxis2={"title": escape_label(rank), "type": "log", "overlaying": "y", "side": "right",
                              "autorange": "reversed", "dtick": 1, "tickformat": ",d"},  # 1, 10, 100, ...
                      legend={"orientation": "h"})
    return fig


def layer_column(values: np.ndarray, title: str, limit: float | None = None, text: PlotText = ENGLISH) -> go.Figure:
    """One value per layer as a one-column heatmap in a diverging scale centred at 0 (over [-limit, limit],
    default max |value|), beside a layers x heads grid drawn with the same limit."""
    z = np.asarray(values, dtype=np.float32)[:, None]
    m = limit if limit is not None else float(np.abs(z).max()) if z.size else 1.0
    m = max(m, 1e-9)
    n = z.shape[0]
    fig = go.Figure(go.Heatmap(z=z, zmin=-m, zmax=m, zmid=0.0, colorscale=DIFFERENCE_COLORS, showscale=False,
                               text=[[f"{v:.2f}"] for v in z[:, 0]], texttemplate="%{text}" if n <= 40 else "",
                               hovertemplate="L%{y}: %{z:.4g}<extra></extra>"))
    fig.update_layout(title=escape_label(title), height=int(min(1600, max(300, 26 * n + 120))),
                      xaxis={"showticklabels": False, "showgrid": False},
                      yaxis={"tickmode": "array", "tickvals": list(range(n)), "ticktext": [f"L{i}" for i in range(n)],
                             "range": [n - 0.5, -0.5], "title": text.layer, "showgrid": False})
    return fig


# Where each kind of node sits within a layer's band (y = layer + offset): the stream entering the layer at
# its bottom, heads above it, the mid state, the MLP, and the next layer's stream at layer + 1.
_OFFSETS = {"resid": 0.0, "head": 0.35, "mid": 0.6, "mlp": 0.8}


KIND_NAMES = {"resid": "residual stream", "mid": "after attention", "mlp": "MLP", "embed": "embed"}


LABELLED_HEADS = 40  # up to this many head nodes carry their name on the routes graph


def routes_graph(nodes: list[dict], edges: list[dict], tokens: list[str], n_heads: int, title: str,
                 text: PlotText = ENGLISH, names: dict | None = None) -> go.Figure:
    """Information-flow routes: x the token positions, y the layers (bottom: the embeddings); heads spread
    across their position's cell by head index; an edge's width and opacity follow its importance. `names`:
    the words for the kinds of node (KIND_NAMES' keys), the caller's language."""
    names = KIND_NAMES | (names or {})
    def place(node: dict) -> tuple[float, float]:
        x = float(node["position"])
        if node["kind"] == "head":
            x += (node["head"] + 0.5) / max(n_heads, 1) * 0.8 - 0.4
        if node["kind"] == "mlp":
            x += 0.25
        return x, node["layer"] + _OFFSETS[node["kind"]]

    where = {node["id"]: place(node) for node in nodes}
    fig = go.Figure()
    for band, (low, high) in enumerate(((0.04, 0.2), (0.2, 0.5), (0.5, 1.01))):  # three widths, few traces
        xs, ys = [], []
        for e in edges:
            if low <= e["importance"] < high or (band == 0 and e["importance"] < low):
                (x0, y0), (x1, y1) = where[e["source"]], where[e["target"]]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line={"width": 1 + 3 * band, "color": f"rgba(70, 110, 180, {0.35 + 0.3 * band})"}))
    heads = [n for n in nodes if n["kind"] == "head"]
    others = [n for n in nodes if n["kind"] != "head"]
    fig.add_trace(go.Scatter(
        x=[where[n["id"]][0] for n in others], y=[where[n["id"]][1] for n in others], mode="markers",
        marker={"size": 7, "color": ["#d98c1f" if n["kind"] == "mlp" else "#7f7f7f" for n in others],
                "symbol": ["square" if n["kind"] == "mlp" else "circle" for n in others]},
        text=[escape_label(f"{names[n['kind']]} L{n['layer']} · {tokens[n['position']]}") for n in others],
        hovertemplate="%{text}<extra></extra>", showlegend=False))
    labelled = len(heads) <= LABELLED_HEADS  # a few heads are named on the graph, many only on hover
    fig.add_trace(go.Scatter(
        x=[where[n["id"]][0] for n in heads], y=[where[n["id"]][1] for n in heads],
        mode="markers+text" if labelled else "markers", textposition="middle right", textfont={"size": 11},
        customdata=[[int(n["layer"]), int(n["head"])] for n in heads],
        text=[f"L{n['layer']} H{n['head']}" for n in heads],
        hovertext=[escape_label(f"L{n['layer']} H{n['head']} · {tokens[n['position']]}") for n in heads],
        hovertemplate=f"%{{hovertext}}<br>{text.open_head}<extra></extra>", showlegend=False,
        marker={"size": 10, "color": HIGHLIGHT_COLOR, "symbol": "diamond"}))
    n_layers = max((n["layer"] for n in nodes), default=0)
    fig.update_layout(
        title=escape_label(title), height=int(min(1800, max(360, 30 * n_layers + 140))), clickmode="event+select",
        xaxis={"tickmode": "array", "tickvals": list(range(len(tokens))),
               "ticktext": [escape_label(t) for t in tokens], "showgrid": False, "zeroline": False},
        yaxis={"tickmode": "array", "tickvals": list(range(n_layers + 1)),
               "ticktext": [escape_label(names["embed"])] + [f"L{i}" for i in range(n_layers)], "title": text.layer,
               "zeroline": False})
    return fig
