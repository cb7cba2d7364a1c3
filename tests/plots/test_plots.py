"""Figure builders: structure, encoding, size, pooling, escaping, masking, thresholds."""

from __future__ import annotations

import itertools
import json

import numpy as np
import plotly.graph_objects as go
import pytest

from attnviz import plots

HOSTILE = ["<script>alert(1)</script>", '<a href="javascript:x">', "the", "the", " ", "\n", ""]


def softmax_rows(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random attention: rows sum to 1, as a softmax of normals."""
    x = np.random.default_rng(seed).normal(size=shape) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def tile(grid: np.ndarray, layer: int, head: int, t: int, s: int) -> np.ndarray:
    """Tile (layer, head) of a mosaic whose tiles are t x s with 1-cell gaps."""
    return grid[layer * (t + 1): layer * (t + 1) + t, head * (s + 1): head * (s + 1) + s]


def all_strings(obj) -> list[str]:
    """Every string in a decoded figure JSON, keys included."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in [k, *all_strings(v)]]
    if isinstance(obj, list):
        return [s for v in obj for s in all_strings(v)]
    return []


# --- model view -------------------------------------------------------------------------------------


def test_model_view_is_one_uint8_heatmap_with_documented_shape():
    n_layers, n_heads, n_tokens = 3, 4, 10
    fig = plots.model_view(softmax_rows((n_layers, n_heads, n_tokens, n_tokens)))
    heatmaps = [trace for trace in fig.data if isinstance(trace, go.Heatmap)]
    assert len(heatmaps) == 1 and fig.data[0] is heatmaps[0]  # one mosaic, not a heatmap per head
    picker = fig.data[1]  # one invisible point per tile, so a click can select a head
    assert len(fig.data) == 3 and sorted(map(tuple, picker.customdata)) == [
        (layer, head) for layer in range(n_layers) for head in range(n_heads)]
    z = fig.data[0].z
    assert isinstance(z, np.ndarray) and z.dtype == np.uint8
    assert z.shape == ((n_layers + 1) * (n_tokens + 1) - 1, (n_heads + 1) * (n_tokens + 1) - 1)
    assert fig.layout.meta["pooled"] is False
    # gaps between tiles hold the transparent sentinel, and only gaps do
    gaps = np.zeros(z.shape, bool)
    gaps[n_tokens::n_tokens + 1, :] = True
    gaps[:, n_tokens::n_tokens + 1] = True
    assert np.all(z[gaps] == plots.MOSAIC_GAP)
    assert np.all(z[~gaps] <= plots.MOSAIC_LEVELS)


def test_model_view_z_is_percent_of_weights():
    a = softmax_rows((2, 3, 6, 6), seed=1)
    fig = plots.model_view(a)
    z = fig.data[0].z
    np.testing.assert_array_equal(tile(z, 1, 2, 6, 6), np.rint(a[1, 2] * 100).astype(np.uint8))


def test_mean_row_and_column_equal_numpy_means():
    a = softmax_rows((3, 4, 7, 7), seed=2)
    grid = plots.mosaic(a)
    n_layers, n_heads = 3, 4
    for layer in range(n_layers):
        np.testing.assert_allclose(tile(grid, layer, n_heads, 7, 7), a[layer].mean(axis=0), atol=1e-6)
    for head in range(n_heads):
        np.testing.assert_allclose(tile(grid, n_layers, head, 7, 7), a[:, head].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(tile(grid, n_layers, n_heads, 7, 7), a.mean(axis=(0, 1)), atol=1e-6)
    # and the quantized figure shows the same means
    z = plots.model_view(a).data[0].z
    expected = np.rint(a[:, 1].mean(axis=0) * 100)
    assert np.abs(tile(z, n_layers, 1, 7, 7).astype(int) - expected).max() <= 1


def test_pooling_at_200_tokens_keeps_rows_summing_to_one():
    a = softmax_rows((2, 2, 200, 200), seed=3)
    fig = plots.model_view(a, max_cells=64)
    t, s = fig.layout.meta["tile"]
    assert fig.layout.meta["pooled"] is True and t <= 64 and s <= 64
    assert fig.data[0].z.shape == (3 * (t + 1) - 1, 3 * (s + 1) - 1)

    edges = plots.pool_edges(200, 64)
    assert edges[0] == 0 and edges[-1] == 200 and len(edges) - 1 == t
    expected = np.array([[a[1, 0, r0:r1, c0:c1].sum(axis=1).mean() for c0, c1 in itertools.pairwise(edges)]
                         for r0, r1 in itertools.pairwise(edges)])  # mean over rows of the block's row sums
    np.testing.assert_allclose(tile(plots.mosaic(a, 64), 1, 0, t, s), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(tile(fig.data[0].z, 1, 0, t, s), np.rint(expected * 100))
    np.testing.assert_allclose(expected.sum(axis=1), 1.0, rtol=1e-5)  # still a distribution per row


def test_pooling_keeps_a_previous_token_diagonal_visible():
    """512 tokens pooled to 64 cells: a previous-token head stays bright (block means gave ~0.11)."""
    a = np.zeros((1, 1, 512, 512), np.float16)
    a[0, 0, 0, 0] = 1
    a[0, 0, np.arange(1, 512), np.arange(0, 511)] = 1
    pooled = plots.pool_tiles(a, 64)[0, 0]
    assert pooled.dtype == np.float32 and np.diag(pooled).min() >= 0.85
    np.testing.assert_allclose(pooled.sum(axis=1), 1.0, rtol=1e-6)


def test_mosaic_size_is_bounded_for_any_model():
    for n_layers, n_heads in [(6, 12), (30, 9), (12, 12), (32, 32)]:
        t = plots.tile_cells(n_layers, n_heads)
        assert (n_layers + 1) * (t + 1) * (n_heads + 1) * (t + 1) <= plots.MOSAIC_CELLS + 1
    assert plots.tile_cells(6, 12) >= 48 and plots.tile_cells(30, 9) >= 32


@pytest.mark.parametrize("scale", ["power", "log"])
def test_mosaic_scale_bends_colours_not_values(scale):
    a = softmax_rows((2, 3, 6, 6), seed=1)
    linear, bent = plots.model_view(a), plots.model_view(a, scale=scale)
    np.testing.assert_array_equal(linear.data[0].z, bent.data[0].z)  # the hover still reads the weight
    assert bent.layout.meta["scale"] == scale and linear.data[0].colorscale != bent.data[0].colorscale
    ticks = [float(v) for v in bent.data[2].marker.colorbar.ticktext]  # the colour bar's own trace
    assert ticks == plots.MOSAIC_TICKS[scale]


def test_pooled_size_only_shrinks_long_inputs():
    assert plots.pooled_size(20, 64) == 20
    assert plots.pooled_size(200, 64) == 64
    with pytest.raises(ValueError, match="max_cells"):
        plots.pooled_size(10, 0)


def test_model_view_json_is_at_most_two_bytes_per_attention_value():
    shape = (12, 12, 64, 64)
    fig = plots.model_view(softmax_rows(shape, seed=4), row_labels=[f"tok{i}" for i in range(64)])
    assert len(fig.to_json()) / np.prod(shape) <= 2.0


def test_model_view_axis_ticks_and_unique_categories():
    fig = plots.model_view(softmax_rows((2, 3, 4, 4)), row_labels=["the", "the", "cat", "the"])
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1", "mean"]
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2", "mean"]
    x, y = list(fig.data[0].x), list(fig.data[0].y)
    assert len(set(x)) == len(x) == fig.data[0].z.shape[1]
    assert len(set(y)) == len(y) == fig.data[0].z.shape[0]
    assert set(fig.layout.yaxis.tickvals) <= set(y) and set(fig.layout.xaxis.tickvals) <= set(x)


def test_kv_groups_are_contiguous_labelled_and_banded():
    kv = [0, 1, 0, 1]  # not contiguous: heads are reordered to 0, 2, 1, 3
    fig = plots.model_view(softmax_rows((2, 4, 5, 5)), kv_group=kv)
    assert fig.layout.meta["head_order"] == [0, 2, 1, 3]
    assert list(fig.layout.xaxis.ticktext) == ["H0·kv0", "H2·kv0", "H1·kv1", "H3·kv1", "mean"]
    bands = [sh for sh in fig.layout.shapes if sh.yref == "paper"]
    assert [b.name for b in bands] == ["kv0", "kv1"]
    assert (bands[0].x0, bands[0].x1) == (-0.5, 1 * 6 + 5 - 0.5)
    with pytest.raises(ValueError, match="kv_group"):
        plots.model_view(softmax_rows((1, 4, 3, 3)), kv_group=[0, 0, 1])


def test_highlight_outlines_the_right_tile():
    fig = plots.model_view(softmax_rows((3, 4, 5, 5)), highlight=[(2, 1)])
    (rect,) = [sh for sh in fig.layout.shapes if sh.yref == "y"]
    assert (rect.x0, rect.x1, rect.y0, rect.y1) == (6 - 0.5, 6 + 5 - 0.5, 12 - 0.5, 12 + 5 - 0.5)
    with pytest.raises(ValueError, match="highlight"):
        plots.model_view(softmax_rows((3, 4, 5, 5)), highlight=[(3, 0)])


# --- escaping ---------------------------------------------------------------------------------------


def test_escape_label():
    assert plots.escape_label("") == "∅"
    assert plots.escape_label(" ") == "␣"
    assert plots.escape_label("\n\n") == "⏎⏎"
    assert plots.escape_label("a&b<c>") == "a&amp;b&lt;c&gt;"
    assert plots.escape_label("&lt;") == "&amp;lt;"
    assert plots.escape_label("<br>") == "&lt;br&gt;"


def hostile_figures() -> dict[str, go.Figure]:
    n = len(HOSTILE)
    a = softmax_rows((2, 2, n, n))
    return {
        "model_view": plots.model_view(a, row_labels=HOSTILE),
        "model_view_pooled": plots.model_view(a, row_labels=HOSTILE, max_cells=3),
        "head_heatmap": plots.head_heatmap(a[0, 0], HOSTILE, HOSTILE, causal=True, scale="log"),
        "head_view": plots.head_view(a[0, 0], HOSTILE, HOSTILE),
        "score_grid": plots.score_grid(np.random.default_rng(0).random((2, 2)), HOSTILE[0]),
    }


@pytest.mark.parametrize("name", list(hostile_figures()))
def test_html_in_labels_never_reaches_the_figure_raw(name):
    fig = hostile_figures()[name]
    strings = all_strings(json.loads(fig.to_json()))
    decoded = "\n".join(strings)
    assert "<script" not in decoded and "<a href" not in decoded and "<a " not in decoded
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in decoded


# --- head heatmap -----------------------------------------------------------------------------------


def test_head_heatmap_duplicate_tokens_get_distinct_ticks():
    labels = ["the", "cat", "the"]
    fig = plots.head_heatmap(softmax_rows((3, 3)), labels, labels)
    for axis, values in ((fig.layout.xaxis, fig.data[0].x), (fig.layout.yaxis, fig.data[0].y)):
        assert len(set(axis.tickvals)) == 3 and len(set(values)) == 3
        assert list(axis.ticktext) == labels


def test_head_heatmap_causal_upper_triangle_is_masked():
    m = np.tril(softmax_rows((5, 5)))
    fig = plots.head_heatmap(m, list("abcde"), list("abcde"), causal=True)
    z = np.asarray(fig.data[0].z)
    upper = np.triu(np.ones((5, 5), bool), k=1)
    assert np.all(np.isnan(z[upper])) and not np.any(np.isnan(z[~upper]))
    mask_trace = fig.data[1]
    assert "masked" in mask_trace.hovertemplate
    np.testing.assert_array_equal(~np.isnan(np.asarray(mask_trace.z)), upper)
    # not causal: nothing masked
    assert len(plots.head_heatmap(m, list("abcde"), list("abcde")).data) == 1


@pytest.mark.parametrize("scale", ["power", "log"])
def test_head_heatmap_scales_keep_colorbar_and_hover_in_attention_units(scale):
    m = softmax_rows((4, 4))
    fig = plots.head_heatmap(m, list("abcd"), list("abcd"), scale=scale)
    trace = fig.data[0]
    np.testing.assert_array_equal(trace.customdata, m)
    assert "customdata" in trace.hovertemplate
    expected = np.sqrt(m) if scale == "power" else np.log10(np.maximum(m, 1e-4))
    np.testing.assert_allclose(trace.z, expected, rtol=1e-6)
    assert "1" in trace.colorbar.ticktext and len(trace.colorbar.tickvals) == len(trace.colorbar.ticktext)
    with pytest.raises(ValueError, match="scale"):
        plots.head_heatmap(m, list("abcd"), list("abcd"), scale="cubic")


# --- head view --------------------------------------------------------------------------------------


def segments(fig: go.Figure) -> set[tuple[int, int]]:
    """(source, target) pairs drawn as line segments."""
    pairs = set()
    for trace in fig.data:
        if trace.mode != "lines":
            continue
        x, y = np.asarray(trace.x), np.asarray(trace.y)
        assert np.all(x[0::3] == 0) and np.all(x[1::3] == 1) and np.all(np.isnan(y[2::3]))
        pairs |= {(int(a), int(b)) for a, b in zip(y[0::3], y[1::3])}
    return pairs


def test_head_view_hides_lines_below_threshold():
    m = softmax_rows((12, 12), seed=5)
    m[3, 4] = 0.049  # just below the threshold
    fig = plots.head_view(m, [f"t{i}" for i in range(12)], [f"t{i}" for i in range(12)], threshold=0.05)
    drawn = segments(fig)
    assert (3, 4) not in drawn
    assert drawn == {(i, j) for i, j in zip(*np.nonzero(m >= 0.05))}
    assert len(fig.data) <= plots.HEAD_VIEW_LEVELS + 2


def test_head_view_focus_draws_only_that_token():
    m = softmax_rows((6, 6), seed=6)
    fig = plots.head_view(m, list("abcdef"), list("abcdef"), focus=2)
    assert {i for i, _ in segments(fig)} == {2}
    assert len(segments(fig)) == 6


def test_head_view_opacity_grows_with_weight():
    m = np.array([[0.9, 0.1], [0.5, 0.5]], np.float32)
    fig = plots.head_view(m, ["a", "b"], ["c", "d"])
    lines = [t for t in fig.data if t.mode == "lines"]
    by_pair = {pair: t.opacity for t in lines for pair in segments(go.Figure(t))}
    assert by_pair[(0, 1)] < by_pair[(1, 0)] < by_pair[(0, 0)]


# --- score grid -------------------------------------------------------------------------------------


def test_score_grid_outlines_best_and_writes_values():
    scores = np.array([[0.1, 0.2, 0.3], [0.9, 0.4, np.nan]])
    fig = plots.score_grid(scores, "subject-verb")
    assert fig.data[0].texttemplate == "%{text}" and fig.data[0].text[1][0] == "0.90"  # each value in its cell
    (rect,) = fig.layout.shapes
    assert (rect.x0, rect.x1, rect.y0, rect.y1) == (-0.5, 0.5, 0.5, 1.5)
    (rect,) = plots.score_grid(scores, "x", best=(0, 2)).layout.shapes
    assert (rect.x0, rect.y0) == (1.5, -0.5)


# --- layering ---------------------------------------------------------------------------------------


def test_colorscales_are_valid_plotly_stops():
    assert {"default", "colorblind"} <= set(plots.COLORSCALES)
    for stops in plots.COLORSCALES.values():
        go.Heatmap(z=[[0, 1]], colorscale=stops)  # plotly validates
        assert stops[0][0] == 0 and stops[-1][0] == 1


def test_pick_points_name_their_head_and_mark_the_clicked_one():
    a = softmax_rows((2, 3, 6, 6), seed=4)
    picks = plots.model_view(a, kv_group=[0, 0, 1]).data[1]
    assert "click to open" in picks.hovertemplate and picks.hoverinfo != "none"
    assert picks.selected.marker.opacity == 1 and picks.unselected.marker.opacity == 0  # plotly's own styling
    bands = [ann for ann in plots.model_view(a, kv_group=[0, 0, 1]).layout.annotations if ann.text.startswith("kv")]
    assert bands and all(ann.font.size >= 12 for ann in bands)
