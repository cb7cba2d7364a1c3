"""Plotly figure builders for attention: the all-heads mosaic, one head as a matrix or as lines, score grids.

Inputs are numpy arrays and token labels, never model objects, so the same figures serve traces from our
own model and attentions taken from anywhere else. The package never calls streamlit: the UI decides
where a figure goes and turns clicks into arguments (e.g. `head_view(..., focus=i)`).

One module per job, each re-exported here as `plots.X`:

- `text`: `PlotText` (the words a figure shows, English by default), `escape_label`, token-axis helpers;
- `colors`: colour scales, palette constants, the mosaic's uint8 encoding and scale bending;
- `shapes`: outlines and sentence dividers drawn over cells;
- `pooling`: pooled sizes, blocks and weights of long inputs, the float mosaic;
- `mosaic`: `model_view`, all layers x all heads;
- `head`: one head as `head_heatmap` or bertviz-style `head_view` lines;
- `grids`: `score_grid`, one score per head;
- `query_key`: the query-key bars and products of one head and query;
- `qk_attribution`: the query components x key components matrix of one score's terms
  (`qk_attribution_heatmap`; `qk_attribution_figure` from a `QKAttribution`);
- `minimal_pairs`: `difference_heatmap` of a minimal pair;
- `readout`: the logit lens's picture and target curve, a per-layer column, information-flow routes;
- `atlas`: the Atlas page's head finder scatter (`head_scatter`) and one head's metrics among the model's
  (`metric_strips`);
- `atlas_head`: one head's max-activation and |q - k| histograms (`max_histogram`, `qk_distance_histogram`), and
  our metrics against a published atlas's (`metric_agreement`);
- `notebook`: one call per figure of the app, from a trace (`mosaic_figure`, `head_figure`, `score_figure`...).

Size rule (docs/app.md, "Facts checked on streamlit"): plotly >= 6 sends numpy arrays base64-encoded, so a figure's
size is set by the dtype of its arrays. Big per-cell arrays are numpy (uint8 where it suffices); only
per-row / per-column labels are Python strings.

Every label that came from text (tokens, titles) goes through `escape_label`, because plotly renders a
subset of HTML in labels and hovers. The words a figure shows itself (axis and colour-bar titles, hovers)
come from a `PlotText`, English by default: the UI passes a translated one.
"""

from attnviz.plots.atlas import head_scatter, metric_strips
from attnviz.plots.atlas_head import max_histogram, metric_agreement, qk_distance_histogram
from attnviz.plots.colors import (
    COLORSCALES,
    DIFFERENCE_COLORS,
    FOCUS_COLOR,
    GROUP_COLORS,
    HIGHLIGHT_COLOR,
    IN_COLOR,
    LINE_COLOR,
    MASK_COLOR,
    MOSAIC_GAP,
    MOSAIC_LEVELS,
    MOSAIC_TICKS,
    NEGATIVE_COLOR,
    POSITIVE_COLOR,
    quantize,
)
from attnviz.plots.grids import score_grid
from attnviz.plots.head import HEAD_VIEW_LEVELS, causal_blocked, head_heatmap, head_view
from attnviz.plots.minimal_pairs import difference_heatmap
from attnviz.plots.mosaic import model_view
from attnviz.plots.notebook import detector_figures, head_figure, mosaic_figure, probe_figure, score_figure
from attnviz.plots.pooling import MOSAIC_CELLS, mosaic, pool_tiles, tile_cells
from attnviz.plots.qk_attribution import qk_attribution_figure, qk_attribution_heatmap
from attnviz.plots.qkmap import qk_map_figure
from attnviz.plots.query_key import query_key_bars, query_key_products
from attnviz.plots.readout import layer_column, lens_grid, routes_graph, target_curve
from attnviz.plots.shapes import DIVIDER_LINES
from attnviz.plots.text import ENGLISH, PlotText, escape_label
from attnviz.trace.tiles import pool_edges, pooled_size

__all__ = [
    "COLORSCALES", "DIFFERENCE_COLORS", "DIVIDER_LINES", "ENGLISH", "FOCUS_COLOR", "GROUP_COLORS", "HEAD_VIEW_LEVELS",
    "HIGHLIGHT_COLOR", "IN_COLOR", "LINE_COLOR", "MASK_COLOR", "MOSAIC_CELLS", "MOSAIC_GAP", "MOSAIC_LEVELS",
    "MOSAIC_TICKS", "NEGATIVE_COLOR", "POSITIVE_COLOR", "PlotText", "causal_blocked", "detector_figures",
    "difference_heatmap", "escape_label", "head_figure", "head_heatmap", "head_view", "model_view", "mosaic",
    "mosaic_figure", "pool_edges", "pool_tiles", "pooled_size", "probe_figure", "quantize", "query_key_bars",
    "query_key_products", "score_figure", "score_grid", "tile_cells",
    "layer_column", "lens_grid", "routes_graph", "target_curve",
    "qk_attribution_figure", "qk_attribution_heatmap",
]
__all__ += ["qk_map_figure"]
__all__ += ["head_scatter", "metric_strips"]
__all__ += ["max_histogram", "metric_agreement", "qk_distance_histogram"]
