"""The app's figures in a notebook: one call each from a trace (or a score grid) to the figure a page draws.

Each call builds its figure with the same builder and the same arguments as the page, so it equals the
app's figure for the same options (in English, or in the words of the `text` given):

- `mosaic_figure`: the Explore page's mosaic of all layers x all heads (`model_view`);
- `head_figure`: the Explore page's head detail, one head as a heatmap or as bertviz-style lines;
- `score_figure`: a layers x heads score grid; `probe_figure` (a relation of `analysis.score_model`, as
  the Head Finder draws it) and `detector_figures` (`analysis.detect_heads`, as the Explore page draws
  them) on top of it.

They take traces or numpy arrays, never a model, and return a `plotly.graph_objects.Figure`
(`fig.show()` in Jupyter). Only the raw attention is drawn; the app's lenses are not.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.analysis import sentence_pairs
from attnviz.analysis.scoring import DIRECTIONS, RelationScore, to_json
from attnviz.analysis.views import attention_view
from attnviz.plots.grids import score_grid
from attnviz.plots.head import head_heatmap, head_view
from attnviz.plots.mosaic import model_view
from attnviz.plots.text import ENGLISH, PlotText
from attnviz.trace import AttentionTrace

# The English titles the app gives these grids (attnviz/ui/strings.py: detector_*, direction_*).
DETECTOR_TITLES = {"previous_token": "previous-token", "duplicate_token": "duplicate-token", "induction": "induction"}
DIRECTION_TITLES = {"source_to_target": "source → target", "target_to_source": "target → source"}


def mosaic_figure(
    trace: AttentionTrace,
    level: str = "token",
    hide_special: bool = False,
    scale: str = "linear",
    palette: str | list = "default",
    highlight: list[tuple[int, int]] | None = None,
    text: PlotText = ENGLISH,
) -> go.Figure:
    """All layers x all heads of `trace` in one mosaic, as the Explore page draws it.

    `level` "token" or "word" and `hide_special` choose the view (`analysis.views.attention_view`);
    `scale` ("linear", "power", "log") bends the colour scale; `palette` is a `plots.COLORSCALES` key
    ("default", "colorblind", "blues") or a stop list; `highlight` outlines (layer, head) tiles. KV
    groups shared by several query heads (MQA/GQA) order the heads and are marked, as in the app.
    """
    view = attention_view(trace, level, hide_special)
    kv_group = trace.kv_group if view.attentions.shape[1] == len(trace.kv_group) else None
    return model_view(view.attentions, kv_group=kv_group, highlight=list(highlight or []), scale=scale,
                      row_labels=view.labels, col_labels=view.labels, colorscale=palette, text=text,
                      layer_kinds=trace.metadata.get("layer_kinds"))


def head_figure(
    trace: AttentionTrace,
    layer: int,
    head: int,
    kind: str = "heatmap",
    level: str = "token",
    hide_special: bool = False,
    scale: str = "linear",
    palette: str | list = "default",
    threshold: float = 0.02,
    focus: int | None = None,
    pair: str = "all",
    direction: str = "out",
    window: slice | None = None,
    causal: bool | None = None,
    text: PlotText = ENGLISH,
) -> go.Figure:
    """One head of `trace` as the Explore page's head detail draws it: `kind` "heatmap" (`head_heatmap`)
    or "lines" (`head_view`, bertviz-style).

    `level`, `hide_special`, `scale` and `palette` as in `mosaic_figure`. The lines: weights below
    `threshold` get none (the app's default 0.02); `focus` (a position of the view) draws only that
    token's lines, in `direction` "out" (what it attends to), "in" (what attends to it) or "both".
    `pair` ("all", "ab", "ba", "aa", "bb") keeps the rows and columns of one sentence of an encoder pair
    (`analysis.sentence_pairs`); a pair's sentences are divided by a line. `window` (a slice of the view's
    positions, rows and columns alike) shows part of a long input, as the app's window slider does
    beyond 96 tokens; None shows every position. `causal` (masked cells drawn as such in the heatmap)
    defaults to the trace's own `metadata["causal"]`.
    """
    if kind not in ("heatmap", "lines"):
        raise ValueError(f"kind must be 'heatmap' or 'lines', got {kind!r}")
    view = attention_view(trace, level, hide_special)
    n_layers, n_heads = view.attentions.shape[:2]
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"layer {layer}, head {head} outside {n_layers} layers x {n_heads} heads")
    window = slice(0, len(view.labels)) if window is None else window
    labels = view.labels[window]
    sides = sentence_pairs.label_sentences(sentence_pairs.view_sequence(trace, level, hide_special))
    if pair != "all" and not sentence_pairs.is_pair(sides):
        raise ValueError(f"pair {pair!r} needs a trace of two sentences (an encoder given text and text_b)")
    if focus is not None and not 0 <= focus < len(labels):
        raise ValueError(f"focus {focus} outside 0..{len(labels) - 1}")
    part = sentence_pairs.slice_pair(sides[window], labels, pair, focus, direction)
    matrix = part.take(np.asarray(view.attentions[layer, head, window, window], dtype=np.float32))
    if matrix.size == 0:
        raise ValueError(f"nothing to draw: pair {pair!r} keeps no row or no column of this window")
    if kind == "lines":
        return head_view(matrix, part.row_labels, part.col_labels, threshold=threshold, focus=part.focus_row,
                         focus_in=part.focus_col, left_divider=part.row_divider, right_divider=part.col_divider)
    causal = bool(trace.metadata.get("causal", False)) if causal is None else causal
    return head_heatmap(matrix, part.row_labels, part.col_labels, scale=scale, colorscale=palette, causal=causal,
                        text=text, row_divider=part.row_divider, col_divider=part.col_divider)


def score_figure(
    grid: np.ndarray,
    title: str = "",
    best: tuple[int, int] | None = None,
    zmin: float | None = 0.0,
    zmax: float | None = 1.0,
    palette: str | list = "default",
    text: PlotText = ENGLISH,
) -> go.Figure:
    """A layers x heads grid of scores (`score_grid`), each value in its cell, the best head outlined
    (`best`, or the highest score when None).

    The colour range is [zmin, zmax], [0, 1] by default (accuracies, detector scores). None takes that
    end from the data as the head-ablation importance scan does: zmin = min(0, lowest), zmax =
    max(highest, 1e-9), so that a grid of effects of any sign and size shows.
    """
    z = np.asarray(grid, dtype=np.float64)
    if zmin is None:
        zmin = min(0.0, float(np.nanmin(z)))
    if zmax is None:
        zmax = max(float(np.nanmax(z)) if z.size else 0.0, 1e-9)
    return score_grid(z, title, best=best, zmin=zmin, zmax=zmax, colorscale=palette, text=text)


def probe_figure(
    scores: dict[str, RelationScore],
    relation: str,
    direction: str = "source_to_target",
    title: str | None = None,
    text: PlotText = ENGLISH,
) -> go.Figure:
    """One relation and direction of `analysis.score_model(model, items)` as the Head Finder draws it:
    the accuracies as its JSON block rounds them (`analysis.scoring.to_json`), the best head outlined.
    `title` defaults to the app's English one ("subject-verb: source → target"). A direction no item
    can be scored in (a causal model cannot look ahead) raises ValueError."""
    if relation not in scores:
        raise ValueError(f"no relation {relation!r} in the scores: {sorted(scores)}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    block = to_json("", {relation: scores[relation]})["relations"][relation]
    if block[direction] is None:
        raise ValueError(f"no item of {relation!r} can be scored {direction} (a causal model cannot look ahead)")
    best = block["best"][direction]
    title = f"{relation}: {DIRECTION_TITLES[direction]}" if title is None else title
    return score_grid(np.array(block[direction], dtype=float), title,
                      best=(best["layer"], best["head"]) if best else None, text=text)


def detector_figures(scores: dict[str, np.ndarray], text: PlotText = ENGLISH) -> dict[str, go.Figure]:
    """The head detectors' grids (`analysis.detect_heads(model)`: previous-token, duplicate-token,
    induction) as the Explore page draws them, one figure per detector, by name."""
    return {name: score_grid(grid, DETECTOR_TITLES.get(name, name), text=text) for name, grid in scores.items()}
