"""The model view: every layer and head of one input in one heatmap mosaic (the Explore page's figure)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.colors import (
    GROUP_COLORS,
    HIGHLIGHT_COLOR,
    MOSAIC_GAP,
    MOSAIC_LEVELS,
    MOSAIC_TICKS,
    dense_stops,
    quantize,
    resolve_colorscale,
    scale_position,
    unscaled,
)
from attnviz.plots.pooling import mosaic, mosaic_of_tiles, pooled_labels, tile_cells
from attnviz.plots.shapes import rect
from attnviz.plots.text import ENGLISH, PlotText
from attnviz.trace.tiles import pooled_size

MAX_HEIGHT = 2400  # px: the tallest mosaic figure


def _axis_labels(names: list[str], cell_labels: list[str], tile: int, prefix: str) -> list[str]:
    """Unique category per mosaic row (or column): "<name> <prefix> <token>", gaps "(name|next)".

    Hover reads these per-row and per-column strings, so a cell's hover names its layer, head and
    tokens without any per-cell array.
    """
    labels = []
    for k, name in enumerate(names):
        labels.extend(f"{name} {prefix} {cell}" for cell in cell_labels[:tile])
        if k + 1 < len(names):
            labels.append(f"(gap {name} | {names[k + 1]})")
    return labels


def _check_kv_group(kv_group: list[int] | None, n_heads: int) -> tuple[list[int], bool]:
    """Head order with KV groups contiguous, and whether groups are shared (MQA/GQA) so worth marking."""
    if kv_group is None:
        return list(range(n_heads)), False
    if len(kv_group) != n_heads:
        raise ValueError(f"kv_group has {len(kv_group)} entries for {n_heads} heads: {list(kv_group)}")
    order = [int(h) for h in np.argsort(np.asarray(kv_group), kind="stable")]
    return order, len(set(kv_group)) < n_heads


def colour_bar(stops: list, scale: str, title: str) -> go.Scatter:
    """The mosaic's colour bar, as a trace of its own with no point: the mosaic's z is linear percent under a bent
    colour scale, so its own bar packed the small weights' colours, and their ticks (0.01, 0.03, 0.1 on the log
    scale), into the bottom few pixels. This bar runs over the scale's positions (0..1) with the unbent stops,
    each tick at the position its weight gets (`colors.scale_position`)."""
    ticks = MOSAIC_TICKS[scale]
    return go.Scatter(
        x=[None], y=[None], mode="markers", hoverinfo="skip", showlegend=False, name="colour bar",
        marker={"color": [0.0, 1.0], "cmin": 0.0, "cmax": 1.0, "colorscale": stops, "showscale": True,
                "colorbar": {"title": title, "tickvals": [scale_position(v, scale) for v in ticks],
                             "ticktext": [f"{v:g}" for v in ticks], "lenmode": "pixels", "len": 300,
                             "yanchor": "top", "y": 1}},
    )


def model_view(
    attentions: np.ndarray,
    kv_group: list[int] | None = None,
    max_cells: int | None = None,
    highlight: list[tuple[int, int]] | None = None,
    row_labels: list[str] | None = None,
    col_labels: list[str] | None = None,
    colorscale: str | list = "default",
    scale: str = "linear",
    text: PlotText = ENGLISH,
    head_mean: bool = True,
    layer_kinds: list[str] | None = None,
    pooled_tiles: bool = False,
) -> go.Figure:
    """All heads in one go.Heatmap mosaic: layers as rows of tiles, heads as columns of tiles.

    One heatmap renders about 10x faster than a make_subplots grid (docs/app.md). Tiles are
    pooled (`pool_tiles`: mean over rows of the sum over columns) to at most max_cells x max_cells, by
    default `tile_cells`, which bounds the figure's size; z is uint8 percent (see MOSAIC_LEVELS) on one
    absolute scale, not per-tile maxima, so colours compare across heads and the hover can print the
    weight. `scale` ("linear", "power", "log") bends the colour scale, not z, so the hover stays exact.
    `kv_group` (len H, the KV head each query head reads) orders heads by group and marks groups with
    bands; `highlight` outlines (layer, head) tiles. `layer_kinds` (one per layer, `ModelConfig.layer_kind`:
    "full", "sliding 512", "full, NoPE", ...) label each layer's row and colour a strip beside it, drawn
    when the layers do not all attend in full. `layout.meta` records pooling and the encoding.
    `text` gives the visible words; the axis categories stay English ("L0 from 3:the", "mean to 2:a").
    `head_mean=False` leaves out the mean column (a per-layer map, [L, 1, T, S], is its own mean).
    `pooled_tiles=True`: `attentions` are tiles [L, H, t, s] already pooled with `max_cells` from the T and S
    positions the labels name (a long text's ReducedTrace.view_tiles); no map is pooled here.
    """
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [layers, heads, T, S], got shape {a.shape}")
    n_layers, n_heads, n_rows, n_cols = a.shape
    max_cells = tile_cells(n_layers, n_heads) if max_cells is None else max_cells
    if pooled_tiles:
        if row_labels is None:
            raise ValueError("pooled tiles need the row labels of the positions they pool")
        n_rows = len(row_labels)
        n_cols = n_rows if col_labels is None else len(col_labels)
        if a.shape[2:] != (pooled_size(n_rows, max_cells), pooled_size(n_cols, max_cells)):
            raise ValueError(f"tiles {a.shape[2:]} are not {n_rows} x {n_cols} positions pooled to {max_cells} cells")
    order, mark_groups = _check_kv_group(kv_group, n_heads)
    row_labels = [str(i) for i in range(n_rows)] if row_labels is None else list(row_labels)
    if col_labels is None:
        col_labels = row_labels if n_cols == n_rows else [str(j) for j in range(n_cols)]
    if len(row_labels) != n_rows or len(col_labels) != n_cols:
        raise ValueError(f"{len(row_labels)} row / {len(col_labels)} column labels for "
                         f"T={n_rows}, S={n_cols}")
    t, s = pooled_size(n_rows, max_cells), pooled_size(n_cols, max_cells)
    pooled = (t, s) != (n_rows, n_cols)

    z = quantize(mosaic_of_tiles(a, order, head_mean) if pooled_tiles else mosaic(a, max_cells, order, head_mean))
    layer_names = [f"L{i}" for i in range(n_layers)] + ["mean"]
    head_names = [f"H{h}·kv{kv_group[h]}" if mark_groups else f"H{h}" for h in order] + (["mean"] if head_mean else [])
    y = _axis_labels(layer_names, pooled_labels(row_labels, max_cells), t, "from")
    x = _axis_labels(head_names, pooled_labels(col_labels, max_cells), s, "to")
    layer_ticktext = layer_names[:-1] + [text.mean]
    head_ticktext = head_names[:-1] + [text.mean] if head_mean else head_names
    strip = layer_kinds is not None and any(kind != "full" for kind in layer_kinds)
    if layer_kinds is not None and len(layer_kinds) != n_layers:
        raise ValueError(f"{len(layer_kinds)} layer kinds for {n_layers} layers")
    if strip:
        layer_ticktext = [f"{name} · {kind}" for name, kind in zip(layer_names, layer_kinds)] + [text.mean]

    top = resolve_colorscale(colorscale)
    if isinstance(top, str):
        raise TypeError(f"model_view needs a COLORSCALES key or a stop list, got {colorscale!r}")
    # Real values 0..100 fill [0, 100/101]; the gap value 101 sits at 1, past a transparent step.
    edge = (MOSAIC_LEVELS + 0.5) / MOSAIC_GAP
    colors = [[unscaled(p, scale) * MOSAIC_LEVELS / MOSAIC_GAP, c] for p, c in dense_stops(top)]
    colors += [[edge, top[-1][1]], [edge, "rgba(0,0,0,0)"], [1.0, "rgba(0,0,0,0)"]]
    what = text.pooled_weight if pooled else text.weight
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=y, zmin=0, zmax=MOSAIC_GAP, colorscale=colors, hoverongaps=False, showscale=False,
        hovertemplate=f"%{{y}}<br>%{{x}}<br>{what} ≈ %{{z}}%<extra></extra>",
    ))
    layer_ticks = [y[k * (t + 1) + t // 2] for k in range(n_layers + 1)]
    head_ticks = [x[k * (s + 1) + s // 2] for k in range(len(head_names))]
    shapes, annotations = [], []
    if mark_groups:
        for g_index, g in enumerate(dict.fromkeys(kv_group[h] for h in order)):
            cols = [k for k, h in enumerate(order) if kv_group[h] == g]
            x0, x1 = cols[0] * (s + 1) - 0.5, cols[-1] * (s + 1) + s - 0.5
            color = GROUP_COLORS[g_index % len(GROUP_COLORS)]
            # Pixel-sized bands just above the plot area, whatever the figure's height.
            shapes.append(rect(x0, x1, 4, 18, yref="paper", fillcolor=color, name=f"kv{g}", line={"width": 0},
                                ysizemode="pixel", yanchor=1))
            annotations.append({"x": (x0 + x1) / 2, "y": 1, "xref": "x", "yref": "paper", "yshift": 28,
                                "text": f"kv{g}", "showarrow": False, "font": {"size": 12, "color": "#222"}})
    if strip:  # a pixel-wide band left of each layer's row, one colour per kind of attention
        palette = {kind: GROUP_COLORS[k % len(GROUP_COLORS)] for k, kind in enumerate(dict.fromkeys(layer_kinds))}
        for layer, kind in enumerate(layer_kinds):
            row = layer * (t + 1)
            shapes.append(rect(-10, -4, row - 0.5, row + t - 0.5, xref="paper", xsizemode="pixel", xanchor=0,
                               fillcolor=palette[kind], line={"width": 0}, name=f"kind L{layer}: {kind}"))
    for layer, head in highlight or []:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"highlight ({layer}, {head}) outside {n_layers} layers x {n_heads} heads")
        col, row = order.index(head) * (s + 1), layer * (t + 1)
        shapes.append(rect(col - 0.5, col + s - 0.5, row - 0.5, row + t - 0.5,
                            name=f"highlight L{layer} H{head}"))
    # Clicking a heatmap cell gives st.plotly_chart no selection (streamlit issue 8760), so one invisible
    # point per tile, carrying (layer, head), is what a click selects.
    tiles = [(layer, head) for layer in range(n_layers) for head in order]
    fig.add_trace(go.Scatter(
        x=[head_ticks[order.index(head)] for _, head in tiles], y=[layer_ticks[layer] for layer, _ in tiles],
        customdata=[list(tile) for tile in tiles],  # plain lists: typed arrays reach st.plotly_chart as dicts
        mode="markers", name="select a head", showlegend=False,
        # The point sits at the tile's centre, where it takes the hover: it names the head it opens.
        hovertemplate=f"L%{{customdata[0]}} H%{{customdata[1]}}: {text.open_head}<extra></extra>",
        # plotly's own selection styling marks the clicked head, with no figure sent again.
        marker={"size": 14, "opacity": 0, "symbol": "circle-open", "color": HIGHLIGHT_COLOR,
                "line": {"width": 3}},
        selected={"marker": {"opacity": 1}}, unselected={"marker": {"opacity": 0}},
    ))
    fig.add_trace(colour_bar(top, scale, text.attention))
    # Wide mosaics get square cells (their height follows a ~900 px width). Tall ones (many layers, few
    # heads: SmolLM2 has 30 x 9) would leave a square-cell plot narrow and centred in a tall figure, so
    # their cells stretch to the width and the height is capped. One column of tiles (a per-layer map:
    # rollout, flow) stays square, narrow as it is: stretched ~16:1 to the width, its diagonal read as a
    # staircase; its cells shrink to keep the height under the cap.
    one_column = len(head_names) == 1
    square = len(y) <= len(x) or one_column
    cell = min(12.0, 900 / len(x), (MAX_HEIGHT - 140) / len(y)) if square else 4.0
    yaxis_scale = {"scaleanchor": "x", "constrain": "domain"} if square else {}
    fig.update_layout(
        shapes=shapes, annotations=annotations,
        height=int(min(MAX_HEIGHT, max(320, cell * len(y) + 140))),
        margin={"t": 70 if mark_groups else 40, "l": 60 + 7 * max(map(len, layer_ticktext)) * strip,
                "r": 20, "b": 50},
        # Fixed ranges: the pick points' markers would otherwise pad the autorange with empty space.
        xaxis={"tickmode": "array", "tickvals": head_ticks, "ticktext": head_ticktext, "showgrid": False,
               "range": [-0.5, len(x) - 0.5], **({"constrain": "domain"} if one_column else {})},
        yaxis={"tickmode": "array", "tickvals": layer_ticks, "ticktext": layer_ticktext, "showgrid": False,
               "range": [len(y) - 0.5, -0.5], "ticklabelstandoff": 12 if strip else 0, **yaxis_scale},
        meta={"pooled": pooled, "tile": [t, s], "source_shape": [n_layers, n_heads, n_rows, n_cols],
              "head_order": order, "z_levels": MOSAIC_LEVELS, "gap_value": MOSAIC_GAP, "scale": scale},
    )
    return fig
