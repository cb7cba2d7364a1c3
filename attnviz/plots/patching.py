"""Activation patching's figures (attnviz.interventions.patching): the residual stream's layers x positions
heatmap, the MLPs' layer column, and the Head Finder's looks-and-matters grid (Dodrio's: one score as the
colour, the other as the size). Effects are signed (0 = the corrupted run, 1 = the clean run), so the colour
scale is diverging around 0, symmetric over [-m, m], m = max(1, max |effect|), so 1 reads the same in every
figure; NaN cells (a position with no partner in the other sentence) are gaps."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import DIFFERENCE_COLORS
from attnviz.plots.text import ENGLISH, PlotText, escape_label, token_axis, unique_keys


def _limit(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(max(1.0, finite.max() if finite.size else 0.0))


def _layers(n_layers: int) -> list[str]:
    return [f"L{layer}" for layer in range(n_layers)]


def residual_heatmap(values: np.ndarray, tokens: list[str], title: str, text: PlotText = ENGLISH) -> go.Figure:
    """values [L, T]: the residual stream entering each layer patched at one position; tokens are data."""
    z = np.asarray(values, dtype=np.float32)
    if z.ndim != 2 or z.shape[1] != len(tokens):
        raise ValueError(f"values {z.shape} do not match {len(tokens)} tokens")
    limit, keys = _limit(z), unique_keys(tokens)
    fig = go.Figure(go.Heatmap(
        z=z, x=keys, y=_layers(z.shape[0]), zmin=-limit, zmax=limit, zmid=0, colorscale=DIFFERENCE_COLORS,
        hoverongaps=False, colorbar={"title": escape_label(title)},
        hovertemplate=f"{text.layer} %{{y}}<br>%{{x}}<br>%{{z:+.3f}}<extra></extra>"))
    fig.update_layout(title=escape_label(title), height=int(min(1400, max(320, 18 * z.shape[0] + 160))),
                      xaxis=token_axis(keys, tokens, tickangle=-60),
                      yaxis={"title": text.layer, "autorange": "reversed"}, meta={"limit": limit})
    return fig


def layer_column(values: np.ndarray, title: str, text: PlotText = ENGLISH) -> go.Figure:
    """values [L]: one effect per layer (each MLP's), as a one-column heatmap beside the heads grid."""
    z = np.asarray(values, dtype=np.float32).reshape(-1, 1)
    limit = _limit(z)
    fig = go.Figure(go.Heatmap(
        z=z, x=[escape_label(title)], y=_layers(z.shape[0]), zmin=-limit, zmax=limit, zmid=0,
        colorscale=DIFFERENCE_COLORS, showscale=False, texttemplate="%{z:.2f}",
        hovertemplate=f"{text.layer} %{{y}}<br>%{{z:+.3f}}<extra></extra>"))
    fig.update_layout(title=escape_label(title), height=int(min(1400, max(320, 22 * z.shape[0] + 120))),
                      yaxis={"title": text.layer, "autorange": "reversed"}, meta={"limit": limit})
    return fig


def looks_and_matters(attention: np.ndarray, effect: np.ndarray, title: str, size_title: str, colour_title: str,
                      text: PlotText = ENGLISH) -> go.Figure:
    """A layers x heads grid of circles: the colour is the patching effect (diverging), the size the
    attention score in [0, 1] (a head that looks is big; one that matters is dark). Each point carries
    (layer, head) in customdata, so a click opens that head."""
    a, e = np.asarray(attention, dtype=np.float64), np.asarray(effect, dtype=np.float64)
    if a.shape != e.shape or a.ndim != 2:
        raise ValueError(f"attention {a.shape} and effect {e.shape} must both be [layers, heads]")
    n_layers, n_heads = a.shape
    layers, heads = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    limit = _limit(e)
    sizes = 4 + 22 * np.clip(np.nan_to_num(a.ravel()), 0, 1)
    fig = go.Figure(go.Scatter(
        x=heads.ravel(), y=layers.ravel(), mode="markers",
        marker={"size": sizes, "color": np.nan_to_num(e.ravel()), "colorscale": DIFFERENCE_COLORS, "cmin": -limit,
                "cmax": limit, "cmid": 0, "line": {"width": 0.5, "color": "#555"},
                "colorbar": {"title": escape_label(colour_title)}},
        customdata=np.stack([layers.ravel(), heads.ravel(), a.ravel(), e.ravel()], axis=1),
        hovertemplate=(f"L%{{customdata[0]}} H%{{customdata[1]}}<br>{escape_label(size_title)} %{{customdata[2]:.3f}}"
                       f"<br>{escape_label(colour_title)} %{{customdata[3]:+.3f}}<extra></extra>")))
    fig.update_layout(title=escape_label(title), height=int(min(1400, max(320, 22 * n_layers + 140))),
                      xaxis={"title": text.head, "dtick": 1}, yaxis={"title": text.layer, "autorange": "reversed",
                                                                  "dtick": 1}, meta={"limit": limit})
    return fig
