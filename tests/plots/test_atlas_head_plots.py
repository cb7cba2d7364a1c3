"""The Atlas dashboard's small figures (attnviz.plots.atlas_head): the max histogram's bins, the |q - k| bins as
distances and shares with the empty tail left out, ours against a published atlas per metric (one point per head
with both values, the selected head apart), and every word that came from the caller escaped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import plots
from attnviz.plots.atlas_head import distance_labels
from attnviz.readouts.atlas_examples import MAX_BINS, QK_DISTANCE_EDGES

HOSTILE = ("<b>x</b>", "$x$", "www.evil.example", '"><img src=x onerror=alert(1)>')


def texts(figure) -> str:
    """Every title, axis title and hover template of a figure, as sent to the browser."""
    return json.dumps(figure.to_plotly_json()["layout"]) + json.dumps(
        [trace.get("hovertemplate") for trace in figure.to_plotly_json()["data"]])


@pytest.mark.parametrize("word", HOSTILE)
def test_words_from_the_caller_are_escaped(word):
    edges = np.linspace(0, 1, MAX_BINS + 1)
    figures = [plots.max_histogram(edges, np.arange(MAX_BINS), word, word, word),
               plots.qk_distance_histogram(QK_DISTANCE_EDGES, np.ones(len(QK_DISTANCE_EDGES) - 1), word, word, word),
               plots.metric_agreement({"m": [[0.1]]}, {"m": [[0.2]]}, {"m": word}, word, word, selected=(0, 0))]
    for figure in figures:
        shown = texts(figure)
        assert plots.escape_label(word) in shown  # plotly links only <a href>: a bare address is plain text
        assert word == plots.escape_label(word) or word not in shown
        assert "<b>x" not in shown and "$x$" not in shown and "<img" not in shown


def test_the_max_histogram_has_a_bar_per_bin():
    edges = np.round(np.linspace(0, 1, MAX_BINS + 1), 4)
    counts = np.arange(MAX_BINS)
    figure = plots.max_histogram(edges, counts, "t", "x", "y")
    bar = figure.data[0]
    assert len(bar.x) == MAX_BINS and np.asarray(bar.y).tolist() == counts.tolist()
    assert bar.x[0] == pytest.approx(0.01) and figure.layout.meta == {"bins": MAX_BINS, "total": int(counts.sum())}


def test_distances_are_labelled_and_the_empty_tail_is_left_out():
    assert distance_labels(QK_DISTANCE_EDGES)[:5] == ["0", "1", "2–3", "4–7", "8–15"]
    assert distance_labels(QK_DISTANCE_EDGES)[-1] == "2048–4095"
    mass = np.zeros(len(QK_DISTANCE_EDGES) - 1)
    mass[[0, 1, 5]] = [2.0, 1.0, 1.0]
    figure = plots.qk_distance_histogram(QK_DISTANCE_EDGES, mass, "t", "x", "y")
    assert list(figure.data[0].x) == distance_labels(QK_DISTANCE_EDGES)[:6]
    assert np.asarray(figure.data[0].y).tolist() == [0.5, 0.25, 0, 0, 0, 0.25]  # shares of the mass


def test_ours_against_the_published_has_a_point_per_head_with_both_values():
    ours = {"a": [[0.1, 0.2], [0.3, None]], "b": [[1.0, 2.0], [3.0, 4.0]], "only_ours": [[0.0, 0.0], [0.0, 0.0]]}
    theirs = {"a": [[0.1, 0.25], [0.3, 0.4]], "b": [[1.0, 2.0], [3.0, None]]}
    figure = plots.metric_agreement(ours, theirs, {"a": "A", "b": "B"}, "ours", "published", selected=(1, 0))
    assert figure.layout.meta == {"points": 6, "metrics": ["a", "b"]}
    markers = [trace for trace in figure.data if trace.mode == "markers"]
    picked = [trace for trace in markers if trace.marker.size == 12]
    assert [list(map(list, trace.customdata)) for trace in picked] == [[[1, 0]], [[1, 0]]]
    assert sum(len(trace.x) for trace in markers) == 6
