"""Plotly figure builders for attention: the all-heads mosaic, one head as a matrix or as lines, score grids.

Inputs are numpy arrays and token labels, never model objects, so the same figures serve traces from our
own model and attentions taken from anywhere else. This module never calls streamlit: the UI decides
where a figure goes and turns clicks into arguments (e.g. `head_view(..., focus=i)`).

Size rule (docs/architecture.md, "Streamlit facts"): plotly >= 6 sends numpy arrays base64-encoded, so a figure's
size is set by the dtype of its arrays. Big per-cell arrays are numpy (uint8 where it suffices); only
per-row / per-column labels are Python strings.

Every label that came from text (tokens, titles) goes through `escape_label`, because plotly renders a
subset of HTML in labels and hovers. The words a figure shows itself (axis and colour-bar titles, hovers)
come from a `PlotText`, English by default: the UI passes a translated one.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go


def _stops(colors: list[str]) -> list[list]:
    return [[i / (len(colors) - 1), c] for i, c in enumerate(colors)]


# Explicit stops rather than plotly names: the mosaic appends a transparent stop for its tile gaps, which
# needs the colours themselves. "default" (viridis) is perceptually uniform and dark at zero, so tile
# gaps stay visible on light and dark themes; "colorblind" (cividis) is tuned for colour-vision
# deficiency (Nuñez et al. 2018); "blues" is the white-to-blue look of bertviz-style plots.
COLORSCALES: dict[str, list[list]] = {
    "default": _stops(["#440154", "#482878", "#3e4989", "#31688e", "#26828e",
                       "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"]),
    "colorblind": _stops(["#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8678",
                          "#a59c74", "#c3b369", "#e1cc55", "#fee838"]),
    "blues": _stops(["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6",
                     "#4292c6", "#2171b5", "#08519c", "#08306b"]),
}

@dataclass(frozen=True)
class PlotText:
    """The words the figures show, English by default. The UI passes a translated one; the category labels
    of the axes ("L0 from 3:the", "3:the") are data and stay as they are in every language."""

    attention: str = "attention"  # colour-bar title
    query_axis: str = "from (query)"
    key_axis: str = "to (key)"
    mean: str = "mean"  # the mosaic's mean row and column
    from_: str = "from"  # hover: the query token
    to: str = "to"  # hover: the key token
    weight: str = "weight"
    pooled_weight: str = "row-mean of the weight summed over the block"
    masked: str = "masked (causal)"
    open_head: str = "click to open this head"
    layer: str = "layer"  # score grids' axis titles
    head: str = "head"


ENGLISH = PlotText()

MASK_COLOR = "#f2c4ce"  # a rose that none of COLORSCALES contains, so masked cells never read as weights
HIGHLIGHT_COLOR = "#d55e00"  # Okabe-Ito vermillion: stands out on viridis and cividis alike
LINE_COLOR = "#1f77b4"
FOCUS_COLOR = "#d55e00"
IN_COLOR = "#009e73"  # Okabe-Ito bluish green: a focused token's incoming lines, apart from its outgoing ones
# Okabe-Ito qualitative palette (colour-blind safe) for the KV-group bands.
GROUP_COLORS = ["#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7", "#999999"]

# The mosaic's z is uint8 percent: z = round(100 * weight). A hovertemplate cannot do arithmetic, so
# storing percent is what lets the hover print the weight ("37%") straight from z with no per-cell text;
# 101 levels are more than a colour scale can show apart. Gap cells (between tiles) hold MOSAIC_GAP,
# which the colorscale paints transparent (uint8 has no NaN).
MOSAIC_LEVELS = 100
MOSAIC_GAP = MOSAIC_LEVELS + 1

_WHITESPACE_SIGNS = {" ": "␣", "\n": "⏎", "\r": "␍", "\t": "⇥"}


def escape_label(text: object) -> str:
    """Make a token or title safe and visible as a plotly label, tick or hover text.

    Plotly renders a subset of HTML (`<b>`, `<br>`, `<a href>`) in text and decodes entities, so `&`,
    `<`, `>` become entities and show literally. Whitespace-only tokens would render as nothing, so each
    of their characters gets a visible sign; a newline inside a token would vanish, so it becomes "⏎".
    A string that starts and ends with `$` would be typeset as LaTeX where MathJax is loaded, so `$`
    becomes an entity too.
    """
    text = str(text)
    if text == "":
        return "∅"
    if text.isspace():
        text = "".join(_WHITESPACE_SIGNS.get(char, "␣") for char in text.replace("\r\n", "\n"))
    else:
        text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("$", "&#36;")


def _rect(x0: float, x1: float, y0: float, y1: float, yref: str = "y", **style) -> dict:
    """A rectangle shape in data coordinates (category axes take the cell index as a number)."""
    shape = {"type": "rect", "xref": "x", "yref": yref, "x0": x0, "x1": x1, "y0": y0, "y1": y1,
             "line": {"color": HIGHLIGHT_COLOR, "width": 3}}
    return shape | style


def _colorscale(spec: str | list) -> str | list:
    """A COLORSCALES key becomes its stops; anything else (a plotly name or stop list) passes through."""
    return COLORSCALES[spec] if isinstance(spec, str) and spec in COLORSCALES else spec


# ---------------------------------------------------------------------------------------------------
# pooling


def pooled_size(n: int, max_cells: int) -> int:
    """Cells one tile side gets for `n` tokens: the mosaic pools longer inputs so its size stays bounded."""
    if max_cells < 1:
        raise ValueError(f"max_cells must be >= 1, got {max_cells}")
    return min(n, max_cells)


def pool_edges(n: int, max_cells: int) -> np.ndarray:
    """Block boundaries [0, ..., n] splitting n tokens into `pooled_size` blocks of near-equal size.

    Blocks differ in size by at most one token, so all `max_cells` cells are used (fixed-size blocks
    would leave 200 tokens at 50 cells with 4-token blocks).
    """
    m = pooled_size(n, max_cells)
    return (np.arange(m + 1) * n) // m


def pool_tiles(a: np.ndarray, max_cells: int) -> np.ndarray:
    """Pool the last two axes (query rows, key columns) to at most `max_cells` blocks each: the mean over
    a block's rows of the sum over its columns.

    Each pooled row of an attention map still sums to 1, so a sharp pattern keeps its brightness: a
    previous-token diagonal at 512 tokens pooled 8:1 shows ~0.9 on the diagonal blocks, where block
    means would dilute it to ~0.1. Pooling is linear, so means over heads or layers commute with it.
    Computed one leading index at a time in float32 (a float16 or float32 input of any size is never
    copied whole). Returns float32.
    """
    a = np.asarray(a)
    n_rows, n_cols = a.shape[-2:]
    rows, cols = pool_edges(n_rows, max_cells), pool_edges(n_cols, max_cells)
    row_sizes = np.diff(rows).astype(np.float32)[:, None]
    lead = a.shape[:-2]
    flat = a.reshape(-1, n_rows, n_cols)
    out = np.empty((flat.shape[0], len(rows) - 1, len(cols) - 1), dtype=np.float32)
    for k, matrix in enumerate(flat):
        summed = np.add.reduceat(np.asarray(matrix, dtype=np.float32), cols[:-1], axis=-1)
        out[k] = np.add.reduceat(summed, rows[:-1], axis=-2) / row_sizes
    return out.reshape(*lead, len(rows) - 1, len(cols) - 1)


# uint8 cells of the mosaic: ~0.55 MB once base64-encoded, whatever the model, so that a whole rerun
# (mosaic, head detail, 512 token chips) sends under 1 MB.
MOSAIC_CELLS = 400_000


def tile_cells(n_layers: int, n_heads: int, limit: int = 64) -> int:
    """Cells per tile side so that the whole mosaic (with its mean row and column) stays within
    MOSAIC_CELLS: 64 (the most) for MiniLM's 6 x 12 heads, 47 for BERT-base's 12 x 12, 34 for SmolLM2's 30 x 9."""
    return max(8, min(limit, math.isqrt(MOSAIC_CELLS // ((n_layers + 1) * (n_heads + 1))) - 1))


def _pooled_labels(labels: list[str], max_cells: int) -> list[str]:
    """One label per pooled cell: "5:the" for a single token, "4–7:the…dog" for a block."""
    edges = pool_edges(len(labels), max_cells)
    result = []
    for start, stop in itertools.pairwise(edges):
        first = escape_label(labels[start])
        if stop - start == 1:
            result.append(f"{start}:{first}")
        else:
            result.append(f"{start}–{stop - 1}:{first}…{escape_label(labels[stop - 1])}")
    return result


# ---------------------------------------------------------------------------------------------------
# model view: one mosaic heatmap of all heads


def mosaic(attentions: np.ndarray, max_cells: int = 64, head_order: list[int] | None = None) -> np.ndarray:
    """Float32 mosaic of all heads: tile (l, h) at rows l*(t+1).., columns h*(s+1).., NaN gaps.

    Shape ((L+1)*(t+1)-1, (H+1)*(s+1)-1) with t, s = pooled_size(T), pooled_size(S): the extra tile
    column is the mean over heads of each layer, the extra tile row the mean over layers of each head
    (and of the head means: the grand mean in the corner). Heads appear in `head_order` if given.
    """
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [layers, heads, T, S], got shape {a.shape}")
    tiles = pool_tiles(a, max_cells)  # [L, H, t, s]
    if head_order is not None:
        tiles = tiles[:, list(head_order)]
    _, _, t, s = tiles.shape
    tiles = np.concatenate([tiles, tiles.mean(axis=1, keepdims=True)], axis=1)  # [L, H+1, t, s]
    tiles = np.concatenate([tiles, tiles.mean(axis=0, keepdims=True)], axis=0)  # [L+1, H+1, t, s]
    padded = np.full((tiles.shape[0], t + 1, tiles.shape[1], s + 1), np.nan, np.float32)
    padded[:, :t, :, :s] = tiles.transpose(0, 2, 1, 3)  # [L+1, t, H+1, s]
    rows, cols = padded.shape[0] * (t + 1), padded.shape[2] * (s + 1)
    return padded.reshape(rows, cols)[:-1, :-1]


# Colour-bar ticks per scale, in attention units. The log scale starts at 0.01, the mosaic's resolution.
MOSAIC_TICKS = {"linear": [0.0, 0.25, 0.5, 0.75, 1.0], "power": [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0],
                "log": [0.01, 0.03, 0.1, 0.3, 1.0]}


def _unscaled(position: float, scale: str) -> float:
    """The weight in [0, 1] that a colour-scale position shows: power is gamma 0.5 (as the head
    heatmap), log spans 0.01..1 (below one percent is the bottom colour)."""
    if scale == "linear":
        return position
    if scale == "power":
        return position**2
    if scale == "log":
        return 0.0 if position == 0 else 10 ** (2 * position - 2)
    raise ValueError(f"scale must be 'linear', 'power' or 'log', got {scale!r}")


def _dense(stops: list[list], per_step: int = 4) -> list[list]:
    """Stops with `per_step` interpolated ones between each pair, so a bent scale stays smooth (plotly
    interpolates linearly in z between stops)."""
    from plotly.colors import find_intermediate_color, hex_to_rgb, label_rgb

    rgb = [(p, hex_to_rgb(c) if c.startswith("#") else c) for p, c in stops]
    dense = []
    for (p0, c0), (p1, c1) in itertools.pairwise(rgb):
        for k in range(per_step):
            f = k / per_step
            dense.append([p0 + f * (p1 - p0), label_rgb(find_intermediate_color(c0, c1, f))])
    dense.append([rgb[-1][0], label_rgb(rgb[-1][1])])
    return dense


def quantize(grid: np.ndarray) -> np.ndarray:
    """uint8 percent of a float mosaic (weights clipped to [0, 1]); NaN gaps become MOSAIC_GAP."""
    q = np.rint(np.clip(np.nan_to_num(grid, nan=0.0), 0.0, 1.0) * MOSAIC_LEVELS).astype(np.uint8)
    q[np.isnan(grid)] = MOSAIC_GAP
    return q


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
) -> go.Figure:
    """All heads in one go.Heatmap mosaic: layers as rows of tiles, heads as columns of tiles.

    One heatmap renders about 10x faster than a make_subplots grid (docs/architecture.md). Tiles are
    pooled (`pool_tiles`: mean over rows of the sum over columns) to at most max_cells x max_cells, by
    default `tile_cells`, which bounds the figure's size; z is uint8 percent (see MOSAIC_LEVELS) on one
    absolute scale, not per-tile maxima, so colours compare across heads and the hover can print the
    weight. `scale` ("linear", "power", "log") bends the colour scale, not z, so the hover stays exact.
    `kv_group` (len H, the KV head each query head reads) orders heads by group and marks groups with
    bands; `highlight` outlines (layer, head) tiles. `layout.meta` records pooling and the encoding.
    `text` gives the visible words; the axis categories stay English ("L0 from 3:the", "mean to 2:a").
    """
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [layers, heads, T, S], got shape {a.shape}")
    n_layers, n_heads, n_rows, n_cols = a.shape
    max_cells = tile_cells(n_layers, n_heads) if max_cells is None else max_cells
    order, mark_groups = _check_kv_group(kv_group, n_heads)
    row_labels = [str(i) for i in range(n_rows)] if row_labels is None else list(row_labels)
    if col_labels is None:
        col_labels = row_labels if n_cols == n_rows else [str(j) for j in range(n_cols)]
    if len(row_labels) != n_rows or len(col_labels) != n_cols:
        raise ValueError(f"{len(row_labels)} row / {len(col_labels)} column labels for "
                         f"T={n_rows}, S={n_cols}")
    t, s = pooled_size(n_rows, max_cells), pooled_size(n_cols, max_cells)
    pooled = (t, s) != (n_rows, n_cols)

    z = quantize(mosaic(a, max_cells, order))
    layer_names = [f"L{i}" for i in range(n_layers)] + ["mean"]
    head_names = [f"H{h}·kv{kv_group[h]}" if mark_groups else f"H{h}" for h in order] + ["mean"]
    y = _axis_labels(layer_names, _pooled_labels(row_labels, max_cells), t, "from")
    x = _axis_labels(head_names, _pooled_labels(col_labels, max_cells), s, "to")
    layer_ticktext, head_ticktext = layer_names[:-1] + [text.mean], head_names[:-1] + [text.mean]

    top = _colorscale(colorscale)
    if isinstance(top, str):
        raise TypeError(f"model_view needs a COLORSCALES key or a stop list, got {colorscale!r}")
    # Real values 0..100 fill [0, 100/101]; the gap value 101 sits at 1, past a transparent step.
    edge = (MOSAIC_LEVELS + 0.5) / MOSAIC_GAP
    colors = [[_unscaled(p, scale) * MOSAIC_LEVELS / MOSAIC_GAP, c] for p, c in _dense(top)]
    colors += [[edge, top[-1][1]], [edge, "rgba(0,0,0,0)"], [1.0, "rgba(0,0,0,0)"]]
    ticks = MOSAIC_TICKS[scale]
    what = text.pooled_weight if pooled else text.weight
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=y, zmin=0, zmax=MOSAIC_GAP, colorscale=colors, hoverongaps=False,
        hovertemplate=f"%{{y}}<br>%{{x}}<br>{what} ≈ %{{z}}%<extra></extra>",
        colorbar={"title": text.attention, "tickvals": [v * MOSAIC_LEVELS for v in ticks],
                  "ticktext": [f"{v:g}" for v in ticks], "lenmode": "pixels", "len": 300, "yanchor": "top", "y": 1},
    ))
    layer_ticks = [y[k * (t + 1) + t // 2] for k in range(n_layers + 1)]
    head_ticks = [x[k * (s + 1) + s // 2] for k in range(n_heads + 1)]
    shapes, annotations = [], []
    if mark_groups:
        for g_index, g in enumerate(dict.fromkeys(kv_group[h] for h in order)):
            cols = [k for k, h in enumerate(order) if kv_group[h] == g]
            x0, x1 = cols[0] * (s + 1) - 0.5, cols[-1] * (s + 1) + s - 0.5
            color = GROUP_COLORS[g_index % len(GROUP_COLORS)]
            # Pixel-sized bands just above the plot area, whatever the figure's height.
            shapes.append(_rect(x0, x1, 4, 18, yref="paper", fillcolor=color, name=f"kv{g}", line={"width": 0},
                                ysizemode="pixel", yanchor=1))
            annotations.append({"x": (x0 + x1) / 2, "y": 1, "xref": "x", "yref": "paper", "yshift": 28,
                                "text": f"kv{g}", "showarrow": False, "font": {"size": 12, "color": "#222"}})
    for layer, head in highlight or []:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"highlight ({layer}, {head}) outside {n_layers} layers x {n_heads} heads")
        col, row = order.index(head) * (s + 1), layer * (t + 1)
        shapes.append(_rect(col - 0.5, col + s - 0.5, row - 0.5, row + t - 0.5,
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
    # Wide mosaics get square cells (their height follows a ~900 px width). Tall ones (many layers, few
    # heads: SmolLM2 has 30 x 9) would leave a square-cell plot narrow and centred in a tall figure, so
    # their cells stretch to the width and the height is capped.
    square = len(y) <= len(x)
    cell = min(12.0, 900 / len(x)) if square else 4.0
    yaxis_scale = {"scaleanchor": "x", "constrain": "domain"} if square else {}
    fig.update_layout(
        shapes=shapes, annotations=annotations,
        height=int(min(2400, max(320, cell * len(y) + 140))),
        margin={"t": 70 if mark_groups else 40, "l": 60, "r": 20, "b": 50},
        # Fixed ranges: the pick points' markers would otherwise pad the autorange with empty space.
        xaxis={"tickmode": "array", "tickvals": head_ticks, "ticktext": head_ticktext, "showgrid": False,
               "range": [-0.5, len(x) - 0.5]},
        yaxis={"tickmode": "array", "tickvals": layer_ticks, "ticktext": layer_ticktext, "showgrid": False,
               "range": [len(y) - 0.5, -0.5], **yaxis_scale},
        meta={"pooled": pooled, "tile": [t, s], "source_shape": [n_layers, n_heads, n_rows, n_cols],
              "head_order": order, "z_levels": MOSAIC_LEVELS, "gap_value": MOSAIC_GAP, "scale": scale},
    )
    return fig


# ---------------------------------------------------------------------------------------------------
# one head as a matrix


def _unique_keys(labels: list[str]) -> list[str]:
    """"3:the"-style categories: a categorical axis merges equal labels, so each gets its position."""
    return [f"{i}:{escape_label(label)}" for i, label in enumerate(labels)]


def _token_axis(keys: list[str], labels: list[str], **extra) -> dict:
    """Category axis ticking every token by its key but showing the bare token; plotly thins past 100."""
    axis = {"showgrid": False, **extra}
    if len(keys) <= 100:
        axis |= {"tickmode": "array", "tickvals": keys, "ticktext": [escape_label(t) for t in labels]}
    return axis


def causal_blocked(n_rows: int, n_cols: int) -> np.ndarray:
    """True where query i may not see key j (j > i, aligned at the end when keys include a prefix)."""
    offset = n_cols - n_rows
    return np.arange(n_cols)[None, :] > np.arange(n_rows)[:, None] + offset


def _scaled(matrix: np.ndarray, scale: str) -> tuple[np.ndarray, float, float, list[float], list[str]]:
    """z, its range, and colorbar ticks placed in z units but labelled in attention units."""
    if scale == "linear":
        ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
        return matrix, 0.0, 1.0, ticks, [f"{v:g}" for v in ticks]
    if scale == "power":  # gamma 0.5 stretches the small weights a diffuse head spreads everywhere
        ticks = [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0]
        tickvals = [math.sqrt(v) for v in ticks]
        return np.sqrt(np.clip(matrix, 0, None)), 0.0, 1.0, tickvals, [f"{v:g}" for v in ticks]
    if scale == "log":  # floor 1e-4 keeps exact zeros (and fp noise) on the scale
        ticks = [-4.0, -3.0, -2.0, -1.0, 0.0]
        text = ["≤1e-4", "0.001", "0.01", "0.1", "1"]
        return np.log10(np.maximum(matrix, 1e-4)), -4.0, 0.0, ticks, text
    raise ValueError(f"scale must be 'linear', 'power' or 'log', got {scale!r}")


# A sentence divider is a black dash over a white line: one of the two stands out on every colour scale
# (viridis and cividis are dark at zero, blues is white there).
DIVIDER_LINES = ({"color": "#ffffff", "width": 4}, {"color": "#000000", "width": 1.5, "dash": "dash"})


def _dividers(row: int | None, col: int | None, shape: tuple[int, int]) -> list[dict]:
    """Lines across the heatmap just before row `row` and column `col` (category axes count cells from 0);
    an index at either edge (or None) draws nothing."""
    shapes = []
    if row is not None and 0 < row < shape[0]:
        shapes += [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": row - 0.5,
                    "y1": row - 0.5, "line": line, "name": "divider rows"} for line in DIVIDER_LINES]
    if col is not None and 0 < col < shape[1]:
        shapes += [{"type": "line", "yref": "paper", "y0": 0, "y1": 1, "xref": "x", "x0": col - 0.5,
                    "x1": col - 0.5, "line": line, "name": "divider columns"} for line in DIVIDER_LINES]
    return shapes


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
    z, zmin, zmax, tickvals, ticktext = _scaled(m, scale)
    z = z.astype(np.float32)
    mask = causal_blocked(*m.shape) if causal else np.zeros(m.shape, bool)
    z[mask] = np.nan
    y, x = _unique_keys(row_labels), _unique_keys(col_labels)
    cells = f"{text.from_} %{{y}}<br>{text.to} %{{x}}<br>"
    trace = go.Heatmap(
        z=z, x=x, y=y, zmin=zmin, zmax=zmax, colorscale=_colorscale(colorscale), hoverongaps=False,
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
        height=int(min(2000, max(360, 16 * m.shape[0] + 160))),
        xaxis=_token_axis(x, col_labels, title=text.key_axis, tickangle=-60),
        yaxis=_token_axis(y, row_labels, title=text.query_axis, autorange="reversed"),
        shapes=_dividers(row_divider, col_divider, m.shape),
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
    left_keys, right_keys = _unique_keys(left_labels), _unique_keys(right_labels)

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


# ---------------------------------------------------------------------------------------------------
# scores per head


def score_grid(
    scores: np.ndarray,
    title: str,
    best: tuple[int, int] | None = None,
    zmin: float = 0,
    zmax: float = 1,
    colorscale: str | list = "default",
    text: PlotText = ENGLISH,
) -> go.Figure:
    """Layers x heads heatmap of a score (e.g. probe accuracy) with each value written in its cell.

    `best` (layer, head) is outlined; None outlines the highest score (first on ties, NaN ignored),
    so the head a reader should look at is found without scanning the numbers.
    """
    z = np.asarray(scores, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f"scores must be [layers, heads], got shape {z.shape}")
    n_layers, n_heads = z.shape
    if best is None and not np.all(np.isnan(z)):
        best = tuple(int(v) for v in np.unravel_index(np.nanargmax(z), z.shape))
    fig = go.Figure(go.Heatmap(
        z=z, zmin=zmin, zmax=zmax, colorscale=_colorscale(colorscale), texttemplate="%{z:.2f}",
        hovertemplate="L%{y} H%{x}<br>%{z:.3f}<extra></extra>", hoverongaps=False,
    ))
    shapes = []
    if best is not None:
        layer, head = best
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"best ({layer}, {head}) outside {n_layers} layers x {n_heads} heads")
        shapes.append(_rect(head - 0.5, head + 0.5, layer - 0.5, layer + 0.5, name="best"))
    fig.update_layout(
        title=escape_label(title), shapes=shapes,
        height=int(min(1600, max(300, 26 * n_layers + 120))),
        xaxis={"tickmode": "array", "tickvals": list(range(n_heads)),
               "ticktext": [f"H{h}" for h in range(n_heads)], "showgrid": False, "title": text.head},
        yaxis={"tickmode": "array", "tickvals": list(range(n_layers)),
               "ticktext": [f"L{i}" for i in range(n_layers)], "showgrid": False, "title": text.layer,
               "autorange": "reversed"},
        meta={"best": list(best) if best is not None else None},
    )
    return fig


# ---------------------------------------------------------------------------------------------------
# the query-key view of one head and one query (attnviz.analysis.query_key)

POSITIVE_COLOR, NEGATIVE_COLOR = "#0072b2", "#d55e00"  # Okabe-Ito blue and vermillion: apart for every eye


def query_key_bars(
    positive: np.ndarray,
    negative: np.ndarray,
    scores: np.ndarray,
    probabilities: np.ndarray,
    key_labels: list[str],
    positions: list[int],
    words: dict[str, str] | None = None,
) -> go.Figure:
    """Per key: the positive and the negative parts of its pre-softmax score (sum of q[d] k[d] / sqrt(D)
    over the dimensions where the product is positive / negative) as bars from zero, the score itself as
    a marker, and the attention weight in the hover. `positions` are the keys' token indices (unique
    categories); `words` overrides the English names of the series ("positive", "negative", "score",
    "weight", "key")."""
    w = {"positive": "positive q·k", "negative": "negative q·k", "score": "score", "weight": "weight",
         "key": "key"} | (words or {})
    x = [f"{p}:{escape_label(label)}" for p, label in zip(positions, key_labels)]
    weights = np.asarray(probabilities, dtype=np.float32)
    hover = f"%{{x}}<br>%{{y:.3f}}<br>{escape_label(w['weight'])} %{{customdata:.4f}}<extra>%{{fullData.name}}</extra>"
    fig = go.Figure()
    for name, values, color in (("positive", positive, POSITIVE_COLOR), ("negative", negative, NEGATIVE_COLOR)):
        fig.add_trace(go.Bar(x=x, y=np.asarray(values, np.float32), name=escape_label(w[name]),
                             marker_color=color, customdata=weights, hovertemplate=hover))
    fig.add_trace(go.Scatter(x=x, y=np.asarray(scores, np.float32), name=escape_label(w["score"]), mode="markers",
                             marker={"color": "#000000", "symbol": "diamond", "size": 9}, customdata=weights,
                             hovertemplate=hover))
    fig.update_layout(
        barmode="relative", height=360, margin={"t": 30, "b": 80},
        xaxis=_token_axis(x, key_labels, title=escape_label(w["key"]), tickangle=-60),
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
        yaxis=_token_axis(y, key_labels, title=escape_label(w["key"]), autorange="reversed"),
    )
    return fig


# ---------------------------------------------------------------------------------------------------
# minimal pairs: one head's attention difference

# Blue for A > B, red for A < B, white at 0 (ColorBrewer RdBu, reversed so blue is positive; colour-blind safe).
DIFFERENCE_COLORS = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]


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
    keys = _unique_keys(labels)
    fig = go.Figure(go.Heatmap(
        z=m, x=keys, y=keys, zmin=-limit, zmax=limit, zmid=0, colorscale=DIFFERENCE_COLORS, hoverongaps=False,
        colorbar={"title": escape_label(colorbar_title)},
        hovertemplate=f"{text.from_} %{{y}}<br>{text.to} %{{x}}<br>%{{z:+.4f}}<extra></extra>",
    ))
    fig.update_layout(
        height=int(min(2000, max(360, 16 * m.shape[0] + 160))),
        xaxis=_token_axis(keys, labels, title=text.key_axis, tickangle=-60),
        yaxis=_token_axis(keys, labels, title=text.query_axis, autorange="reversed"),
        meta={"limit": limit},
    )
    return fig
