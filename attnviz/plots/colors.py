"""Colours of the figures: the colour scales and their stops, the palette constants, and how a weight
becomes a colour (the mosaic's uint8 percent and its bent scales, the head heatmap's scaled z and ticks).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


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

MASK_COLOR = "#f2c4ce"  # a rose that none of COLORSCALES contains, so masked cells never read as weights
HIGHLIGHT_COLOR = "#d55e00"  # Okabe-Ito vermillion: stands out on viridis and cividis alike
LINE_COLOR = "#1f77b4"
FOCUS_COLOR = "#d55e00"
IN_COLOR = "#009e73"  # Okabe-Ito bluish green: a focused token's incoming lines, apart from its outgoing ones
# Okabe-Ito qualitative palette (colour-blind safe) for the KV-group bands.
GROUP_COLORS = ["#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7", "#999999"]
# The query-key view's positive and negative parts.
POSITIVE_COLOR, NEGATIVE_COLOR = "#0072b2", "#d55e00"  # Okabe-Ito blue and vermillion: apart for every eye
BIAS_COLOR = "#009e73"  # Okabe-Ito bluish green: a score's position term (ALiBi), beside the two

# Blue for A > B, red for A < B, white at 0 (ColorBrewer RdBu, reversed so blue is positive; colour-blind safe).
DIFFERENCE_COLORS = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]

# The mosaic's z is uint8 percent: z = round(100 * weight). A hovertemplate cannot do arithmetic, so
# storing percent is what lets the hover print the weight ("37%") straight from z with no per-cell text;
# 101 levels are more than a colour scale can show apart. Gap cells (between tiles) hold MOSAIC_GAP,
# which the colorscale paints transparent (uint8 has no NaN).
MOSAIC_LEVELS = 100
MOSAIC_GAP = MOSAIC_LEVELS + 1


def resolve_colorscale(spec: str | list) -> str | list:
    """A COLORSCALES key becomes its stops; anything else (a plotly name or stop list) passes through."""
    return COLORSCALES[spec] if isinstance(spec, str) and spec in COLORSCALES else spec


# Colour-bar ticks per scale, in attention units. The log scale starts at 0.01, the mosaic's resolution.
MOSAIC_TICKS = {"linear": [0.0, 0.25, 0.5, 0.75, 1.0], "power": [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0],
                "log": [0.01, 0.03, 0.1, 0.3, 1.0]}


def unscaled(position: float, scale: str) -> float:
    """The weight in [0, 1] that a colour-scale position shows: power is gamma 0.5 (as the head
    heatmap), log spans 0.01..1 (below one percent is the bottom colour)."""
    if scale == "linear":
        return position
    if scale == "power":
        return position**2
    if scale == "log":
        return 0.0 if position == 0 else 10 ** (2 * position - 2)
    raise ValueError(f"scale must be 'linear', 'power' or 'log', got {scale!r}")


def scale_position(weight: float, scale: str) -> float:
    """The colour-scale position in [0, 1] of a weight: the inverse of `unscaled` (log: 0.01 and below at 0)."""
    if scale == "linear":
        return weight
    if scale == "power":
        return math.sqrt(weight)
    if scale == "log":
        return 0.0 if weight <= 0.01 else (math.log10(weight) + 2) / 2
    raise ValueError(f"scale must be 'linear', 'power' or 'log', got {scale!r}")


def dense_stops(stops: list[list], per_step: int = 4) -> list[list]:
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


def scaled(matrix: np.ndarray, scale: str) -> tuple[np.ndarray, float, float, list[float], list[str]]:
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
