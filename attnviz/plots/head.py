"""One head: its attention as a token x token heatmap (`head_heatmap`, with the causal mask) or as
bertviz-style lines from each query token to each key token (`head_view`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import FOCUS_COLOR, IN_COLOR, LINE_COLOR, MASK_COLOR, resolve_colorscale, scaled
from attnviz.plots.shapes import dividers
from attnviz.plots.text import ENGLISH, PlotText, escape_label, token_axis, unique_keys


def causal_blocked(n_rows: int, n_cols: int) -> np.ndarray:
    """True where query i may not see key j (j > i, aligned at the end when keys include a prefix)."""
    offset = n_cols - n_rows
    return np.arange(n_cols)[None, :] > np.arange(n_rows)[:, None] + offset


def head_heatmap(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    scale: str = "linear",
    colorscale: str | list = "default",
    causal: bool = False,
    text: PlotText = ENGLISH,
    row_divider: int | None = None,
    col_divider: int | None = None,
) -> go.Figure:
    """One head's T x S attention with token labels on both axes.

    Axes are categorical with unique keys ("3:the") so repeated tokens keep their own row and column;
    ticks show the bare token. The colour range is fixed to attention in [0, 1] (through `scale`) so
    heads compare; hover prints the unscaled weight. With `causal`, cells a query cannot see are NaN in
    the weight trace and drawn by a second trace in MASK_COLOR whose hover says "masked".
    `row_divider` / `col_divider` (the index of the first row / column of a second sentence) draw a line
    just before that row / column, as between the sentences of an encoder pair.
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix shape {m.shape} does not match "
                         f"{len(row_labels)} x {len(col_labels)} labels")
    z, zmin, zmax, tickvals, ticktext = scaled(m, scale)
    z = z.astype(np.float32)
    mask = causal_blocked(*m.shape) if causal else np.zeros(m.shape, bool)
    z[mask] = np.nan
    y, x = unique_keys(row_labels), unique_keys(col_labels)
    cells = f"{text.from_} %{{y}}<br>{text.to} %{{x}}<br>"
    trace = go.Heatmap(
        z=z, x=x, y=y, zmin=zmin, zmax=zmax, colorscale=resolve_colorscale(colorscale), hoverongaps=False,
        colorbar={"title": text.attention, "tickvals": tickvals, "ticktext": ticktext},
        hovertemplate=f"{cells}{text.weight} %{{z:.4f}}<extra></extra>",
    )
    if scale != "linear":  # z is transformed: hover reads the weight from customdata
        trace.customdata = m
        trace.hovertemplate = f"{cells}{text.weight} %{{customdata:.4f}}<extra></extra>"
    fig = go.Figure(trace)
    if mask.any():
        fig.add_trace(go.Heatmap(
            z=np.where(mask, 1.0, np.nan).astype(np.float32), x=x, y=y, showscale=False,
            hoverongaps=False, colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]], name="masked",
            hovertemplate=f"{cells}{text.masked}<extra></extra>",
        ))
    fig.update_layout(
        # No title: plotly's default top margin (100 px) left a blank band above the map.
        height=int(min(2000, max(360, 16 * m.shape[0] + 160))), margin={"t": 20},
        xaxis=token_axis(x, col_labels, title=text.key_axis, tickangle=-60),
        yaxis=token_axis(y, row_labels, title=text.query_axis, autorange="reversed"),
        shapes=dividers(row_divider, col_divider, m.shape),
        meta={"scale": scale, "causal": causal, "dividers": [row_divider, col_divider]},
    )
    return fig


# ---------------------------------------------------------------------------------------------------
# one head as lines (bertviz head view)

HEAD_VIEW_LEVELS = 8


def head_view(
    matrix: np.ndarray,
    left_labels: list[str],
    right_labels: list[str],
    threshold: float = 0.0,
    focus: int | None = None,
    focus_in: int | None = None,
    left_divider: int | None = None,
    right_divider: int | None = None,
) -> go.Figure:
    """bertviz-style lines from each from-token (left) to each to-token (right), opacity ~ weight.

    Plotly has no per-segment opacity and cannot restyle on hover without JavaScript, so: weights are
    bucketed into HEAD_VIEW_LEVELS opacity levels, one Scatter per level holding all its segments
    (NaN-separated), so the figure has at most 2 * HEAD_VIEW_LEVELS + 2 traces whatever T is (without
    `focus_in`, HEAD_VIEW_LEVELS + 2). Isolation is a re-render: `focus=i` draws only row i's lines (what
    token i attends to, outgoing) in FOCUS_COLOR; `focus_in=j` draws column j's lines (what attends to
    key j, incoming) in IN_COLOR; both together draw both (a line in both is drawn once, as outgoing).
    The token markers carry their index in customdata, so the UI can turn a click (st.plotly_chart
    selection) into `focus`; hovering a token lists its strongest links. Weights below `threshold`, and
    exact zeros, get no line. `left_divider` / `right_divider` (the index of the first token of a second
    sentence on that side) mark the split between the sentences of an encoder pair.
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape != (len(left_labels), len(right_labels)):
        raise ValueError(f"matrix shape {m.shape} does not match "
                         f"{len(left_labels)} x {len(right_labels)} labels")
    if focus is not None and not 0 <= focus < m.shape[0]:
        raise ValueError(f"focus {focus} outside 0..{m.shape[0] - 1}")
    if focus_in is not None and not 0 <= focus_in < m.shape[1]:
        raise ValueError(f"focus_in {focus_in} outside 0..{m.shape[1] - 1}")
    drawn = (m >= threshold) & (m > 0)
    if focus is None and focus_in is None:
        kinds = [("", drawn, LINE_COLOR)]
    else:
        outgoing, incoming = np.zeros_like(drawn), np.zeros_like(drawn)
        if focus is not None:
            outgoing[focus] = drawn[focus]
        if focus_in is not None:
            incoming[:, focus_in] = drawn[:, focus_in] & ~outgoing[:, focus_in]
        kinds = [("", outgoing, FOCUS_COLOR), ("in ", incoming, IN_COLOR)]
    level = np.clip(np.ceil(m * HEAD_VIEW_LEVELS), 1, HEAD_VIEW_LEVELS).astype(int)
    fig = go.Figure()
    for prefix, keep, color in kinds:
        for k in range(1, HEAD_VIEW_LEVELS + 1):
            rows, cols = np.nonzero(keep & (level == k))
            if len(rows) == 0:
                continue
            xs = np.tile(np.array([0.0, 1.0, np.nan], np.float32), len(rows))
            ys = np.stack([rows, cols, np.full(len(rows), np.nan)], axis=1).astype(np.float32).ravel()
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                name=f"{prefix}weight ≤ {k / HEAD_VIEW_LEVELS:g}", opacity=(k - 0.5) / HEAD_VIEW_LEVELS,
                line={"color": color, "width": 2},
            ))
    left_keys, right_keys = unique_keys(left_labels), unique_keys(right_labels)

    def strongest(weights: np.ndarray, keys: list[str], arrow: str) -> str:
        top = np.argsort(-weights, kind="stable")[:3]
        return "<br>".join(f"{arrow} {keys[j]}: {weights[j]:.3f}" for j in top)

    for side, keys, labels, weights, arrow in (
        (0.0, left_keys, left_labels, m, "→"), (1.0, right_keys, right_labels, m.T, "←"),
    ):
        fig.add_trace(go.Scatter(
            x=np.full(len(keys), side), y=np.arange(len(keys)), mode="markers+text",
            text=[escape_label(label) for label in labels], customdata=np.arange(len(keys)),
            textposition="middle left" if side == 0 else "middle right",
            hovertext=[f"{key}<br>{strongest(w, right_keys if side == 0 else left_keys, arrow)}"
                       for key, w in zip(keys, weights)],
            hoverinfo="text", showlegend=False, name="from" if side == 0 else "to",
            marker={"size": 7, "color": [FOCUS_COLOR if side == 0 and i == focus
                                         else IN_COLOR if side == 1 and i == focus_in else "#555555"
                                         for i in range(len(keys))]},
        ))
    # A divider is a short dashed rule between the last token of one sentence and the first of the next,
    # under that side's labels only (the two columns may split at different rows under a filter).
    shapes = [{"type": "line", "xref": "x", "yref": "y", "x0": x0, "x1": x1, "y0": d - 0.5, "y1": d - 0.5,
               "line": {"color": "#555555", "width": 1.5, "dash": "dash"}, "name": f"divider {side}"}
              for side, d, n, (x0, x1) in (("left", left_divider, m.shape[0], (-0.7, 0.05)),
                                           ("right", right_divider, m.shape[1], (0.95, 1.7)))
              if d is not None and 0 < d < n]
    fig.update_layout(
        height=int(max(300, 18 * max(m.shape) + 80)), margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"visible": False, "range": [-0.7, 1.7], "fixedrange": True},
        yaxis={"visible": False, "autorange": "reversed", "fixedrange": True}, shapes=shapes,
        hovermode="closest", meta={"threshold": threshold, "focus": focus, "focus_in": focus_in,
                                   "levels": HEAD_VIEW_LEVELS, "dividers": [left_divider, right_divider]},
    )
    return fig
