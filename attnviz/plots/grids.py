"""Score grids: one number per head, layers x heads (the Head Finder's probe accuracies, the head
detectors, the importance scan of head ablation), the best head outlined."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import DIFFERENCE_COLORS, HIGHLIGHT_COLOR, resolve_colorscale
from attnviz.plots.shapes import rect
from attnviz.plots.text import ENGLISH, PlotText, escape_label

# Cells the values are printed in at most: past this many heads a cell is too narrow for a readable number
# (11 px digits), and the values are shown on hover only.
MAX_PRINTED_HEADS = 16
VALUE_FONT_PX = 11


def value_format(z: np.ndarray) -> str:
    """How a grid's cells print: ".2f" (two decimals) where every nonzero |value| is at least 0.1, else ".2g" (two
    significant digits: 0.85, 0.12, 0.0052), so small values stay apart instead of all reading 0.00 as MiniLM's
    scan did (0.0005 to 0.12). `cell_texts` applies it."""
    finite = np.abs(z[np.isfinite(z)])
    nonzero = finite[finite > 0]
    return ".2f" if nonzero.size == 0 or nonzero.min() >= 0.1 else ".2g"


SMALLEST_PRINTED = 1e-4  # below this a cell prints as 0 (float noise such as 9.3e-15 would print 16 digits)


def cell_texts(z: np.ndarray, fmt: str) -> list[list[str]]:
    """Each cell's printed value under `fmt` (value_format); NaN prints nothing."""
    def one(v: float) -> str:
        if not np.isfinite(v):
            return ""
        if fmt == ".2g" and abs(v) < SMALLEST_PRINTED:
            return "0"
        return format(float(v), fmt)

    return [[one(v) for v in row] for row in z]


def score_grid(
    scores: np.ndarray,
    title: str,
    best: tuple[int, int] | None = None,
    zmin: float = 0,
    zmax: float = 1,
    colorscale: str | list = "default",
    text: PlotText = ENGLISH,
    diverging: bool = False,
) -> go.Figure:
    """Layers x heads heatmap of a score (e.g. probe accuracy) with each value written in its cell.

    `best` (layer, head) is outlined; None outlines the highest score (first on ties, NaN ignored),
    so the head a reader should look at is found without scanning the numbers. `diverging` is for signed
    quantities (the importance scan): a blue-white-red scale centred at 0 over [-m, m], m = max |value|
    (zmin, zmax and colorscale are then not used). Values are printed at VALUE_FONT_PX (`cell_texts`),
    or shown on hover only past MAX_PRINTED_HEADS heads (`layout.meta.values`). One invisible point per
    cell carries (layer, head) in customdata: a click on it is what st.plotly_chart's selection returns
    (a heatmap cell gives none, streamlit issue 8760).
    """
    z = np.asarray(scores, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"scores must be [layers, heads], got shape {z.shape}")
    n_layers, n_heads = z.shape
    if best is None and not np.all(np.isnan(z)):
        best = tuple(int(v) for v in np.unravel_index(np.nanargmax(z), z.shape))
    if diverging:
        finite = np.abs(z[np.isfinite(z)])
        limit = float(finite.max()) if finite.size and finite.max() > 0 else 1e-9
        zmin, zmax, scale = -limit, limit, DIFFERENCE_COLORS
    else:
        scale = resolve_colorscale(colorscale)
    fmt = value_format(z)
    printed = n_heads <= MAX_PRINTED_HEADS
    fig = go.Figure(go.Heatmap(
        z=z, zmin=zmin, zmax=zmax, colorscale=scale, text=cell_texts(z, fmt) if printed else None,
        texttemplate="%{text}" if printed else "",
        textfont={"size": VALUE_FONT_PX}, hovertemplate="L%{y} H%{x}<br>%{z:.4g}<extra></extra>",
        hoverongaps=False, **({"zmid": 0.0} if diverging else {}),
    ))
    cells = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    fig.add_trace(go.Scatter(
        x=[head for _, head in cells], y=[layer for layer, _ in cells],
        # Plain lists of ints: typed arrays reach st.plotly_chart's selection as dicts, and a null in the
        # customdata loses the selection (streamlit issue 12191), so the value rides in `text` (markers only).
        customdata=[[layer, head] for layer, head in cells],
        text=["–" if np.isnan(z[layer, head]) else f"{z[layer, head]:.4g}" for layer, head in cells],
        mode="markers", name="select a head", showlegend=False,
        hovertemplate=f"L%{{customdata[0]}} H%{{customdata[1]}}: %{{text}}<br>{text.open_head}<extra></extra>",
        marker={"size": 16, "opacity": 0, "symbol": "square-open", "color": HIGHLIGHT_COLOR, "line": {"width": 3}},
        selected={"marker": {"opacity": 1}}, unselected={"marker": {"opacity": 0}},
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
               "ticktext": [f"H{h}" for h in range(n_heads)], "showgrid": False, "title": text.head,
               "range": [-0.5, n_heads - 0.5], "zeroline": False},
        # Fixed ranges: the pick points' markers would otherwise pad the autorange.
        yaxis={"tickmode": "array", "tickvals": list(range(n_layers)),
               "ticktext": [f"L{i}" for i in range(n_layers)], "showgrid": False, "title": text.layer,
               "range": [n_layers - 0.5, -0.5], "zeroline": False},
        meta={"best": list(best) if best is not None else None, "values": fmt if printed else "hover",
              "diverging": diverging},
    )
    return fig
