"""attnviz.plots.notebook: the app's figures from a trace, in a process where streamlit cannot be imported,
equal to the figures the pages build with the low-level builders.

One subprocess loads MiniLM once, with `sys.modules["streamlit"] = None` set before anything is imported
(an import of streamlit anywhere then raises), builds every notebook figure and hands back the figures'
JSON and the traces and scores it drew them from (pickled). The tests here rebuild each figure the way
attnviz/ui/explore.py, head_finder.py and ablation.py call the builders, and compare.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import plotly.graph_objects as go
import pytest

from attnviz import plots
from attnviz.analysis import sentence_pairs
from attnviz.analysis.scoring import to_json
from attnviz.analysis.views import attention_view
from tests.conftest import MINILM, ROOT, require_offline

SCRIPT = r"""
import pickle, sys
sys.modules["streamlit"] = None  # from here on, `import streamlit` anywhere raises ImportError

import attnviz
import attnviz.plots as plots
from attnviz.analysis import detect_heads, score_model
from attnviz.probesets import builtin_items

model = attnviz.load("sentence-transformers/all-MiniLM-L6-v2")
trace = model.run("The keys to the cabinet are on the table.")
pair = model.run("The cat sat on the mat.", "It was tired.")
scores = score_model(model, builtin_items("builtin:en")[:12])
detectors = detect_heads(model, n=8, sequences=1)
figures = {
    "mosaic": plots.mosaic_figure(trace),
    "mosaic_word": plots.mosaic_figure(trace, level="word", scale="log", palette="colorblind"),
    "mosaic_hidden": plots.mosaic_figure(trace, hide_special=True, scale="power", highlight=[(1, 2)]),
    "heatmap": plots.head_figure(trace, 2, 3),
    "lines": plots.head_figure(trace, 2, 3, kind="lines", focus=4, direction="both", threshold=0.05),
    "pair_heatmap": plots.head_figure(pair, 1, 5, pair="ab", scale="power", palette="blues"),
    "pair_lines": plots.head_figure(pair, 1, 5, kind="lines", focus=2),
    "scan": plots.score_figure(detectors["induction"] - 0.2, "scan", zmin=None, zmax=None),
    **{f"probe {relation}": plots.probe_figure(scores, relation) for relation in scores},
    **{f"detector {name}": figure for name, figure in plots.detector_figures(detectors).items()},
}
loaded = sorted(name for name, module in sys.modules.items() if name.split(".")[0] == "streamlit" and module)
assert not loaded, loaded
with open(sys.argv[1], "wb") as out:
    pickle.dump({"trace": trace, "pair": pair, "scores": scores, "detectors": detectors,
                 "types": {name: type(figure).__module__ + "." + type(figure).__name__
                           for name, figure in figures.items()},
                 "figures": {name: figure.to_json() for name, figure in figures.items()}}, out)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require_offline(MINILM)
    out = tmp_path_factory.mktemp("notebook") / "figures.pkl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    with open(out, "rb") as f:
        return pickle.load(f)


def untemplated(figure_json: str) -> dict:
    """A figure's data and layout without its template: that is plotly's process default (importing
    streamlit, as other tests in this process do, installs its own), not something a builder sets."""
    figure = json.loads(figure_json)
    figure["layout"].pop("template", None)
    return figure


def same(built, name: str, figure: go.Figure) -> None:
    assert untemplated(built["figures"][name]) == untemplated(figure.to_json()), name


def test_every_figure_builds_without_streamlit(built):
    assert set(built["types"].values()) == {"plotly.graph_objs._figure.Figure"}
    figures = {name: json.loads(text) for name, text in built["figures"].items()}
    n = len(built["trace"].tokens)
    assert figures["mosaic"]["layout"]["meta"]["source_shape"] == [6, 12, n, n]
    assert figures["mosaic_word"]["layout"]["meta"]["source_shape"][2] == len(built["trace"].words)
    assert figures["mosaic_hidden"]["layout"]["meta"]["source_shape"][2] == n - 2  # [CLS] and [SEP] hidden
    assert len(figures["heatmap"]["data"][0]["y"]) == n
    assert figures["lines"]["layout"]["meta"]["focus"] == 4
    assert figures["pair_heatmap"]["layout"]["meta"]["dividers"] == [None, None]  # A rows, B columns only
    assert [d["name"] for d in figures["pair_lines"]["layout"]["shapes"]] == ["divider left", "divider right"]
    assert {name for name in figures if name.startswith(("probe", "detector"))} == {
        *(f"probe {relation}" for relation in built["scores"]),
        "detector previous_token", "detector duplicate_token", "detector induction"}


def test_mosaic_equals_the_explore_page(built):
    """explore.model_view: plots.model_view on models.view_of's view, with the trace's KV groups."""
    trace = built["trace"]
    for name, level, hide_special, scale, palette, highlight in (
        ("mosaic", "token", False, "linear", "default", []),
        ("mosaic_word", "word", False, "log", "colorblind", []),
        ("mosaic_hidden", "token", True, "power", "default", [(1, 2)]),
    ):
        view = attention_view(trace, level, hide_special)
        figure = plots.model_view(
            view.attentions, kv_group=trace.kv_group if view.attentions.shape[1] == len(trace.kv_group) else None,
            highlight=highlight, scale=scale, row_labels=view.labels, col_labels=view.labels, colorscale=palette,
            text=plots.ENGLISH)
        same(built, name, figure)
        same(built, name, plots.mosaic_figure(trace, level, hide_special, scale, palette, highlight))


def explore_head(trace, layer, head, scale="linear", palette="default", threshold=0.02, focus=None, pair="all",
                 direction="out", encoder_pair=False):
    """explore.head_detail's two figures for an input of at most HEAD_WINDOW tokens."""
    view = attention_view(trace, "token", False)
    window = slice(0, len(view.labels))
    labels = view.labels[window]
    sides = sentence_pairs.label_sentences(sentence_pairs.view_sequence(trace, "token", False))
    pair = pair if encoder_pair and sentence_pairs.is_pair(sides) else "all"
    part = sentence_pairs.slice_pair(sides[window], labels, pair, focus, direction)
    matrix = part.take(np.asarray(view.attentions[layer, head, window, window], dtype=np.float32))
    heatmap = plots.head_heatmap(matrix, part.row_labels, part.col_labels, scale=scale, colorscale=palette,
                                 causal=False, text=plots.ENGLISH, row_divider=part.row_divider,
                                 col_divider=part.col_divider)
    lines = plots.head_view(matrix, part.row_labels, part.col_labels, threshold=threshold, focus=part.focus_row,
                            focus_in=part.focus_col, left_divider=part.row_divider, right_divider=part.col_divider)
    return heatmap, lines


def test_head_figures_equal_the_explore_page(built):
    same(built, "heatmap", explore_head(built["trace"], 2, 3)[0])
    same(built, "lines", explore_head(built["trace"], 2, 3, focus=4, direction="both", threshold=0.05)[1])
    same(built, "pair_heatmap", explore_head(built["pair"], 1, 5, "power", "blues", pair="ab", encoder_pair=True)[0])
    same(built, "pair_lines", explore_head(built["pair"], 1, 5, focus=2, encoder_pair=True)[1])


def test_score_figures_equal_the_pages(built):
    """head_finder.show_scores (the JSON block's grid and best head), explore.head_detectors, and
    ablation.importance_scan (its colour range from the data)."""
    for relation in built["scores"]:
        block = to_json("any", built["scores"])["relations"][relation]
        best = block["best"]["source_to_target"]
        same(built, f"probe {relation}", plots.score_grid(
            np.array(block["source_to_target"], dtype=float), f"{relation}: source → target",
            best=(best["layer"], best["head"]) if best else None, text=plots.ENGLISH))
    for name, grid in built["detectors"].items():
        same(built, f"detector {name}", plots.score_grid(grid, plots.notebook.DETECTOR_TITLES[name],
                                                         text=plots.ENGLISH))
    grid = np.asarray(built["detectors"]["induction"] - 0.2, dtype=np.float64)
    same(built, "scan", plots.score_grid(grid, "scan", zmin=min(0.0, float(np.nanmin(grid))),
                                         zmax=max(float(np.nanmax(grid)), 1e-9), text=plots.ENGLISH))


def test_titles_are_the_apps_english_ones():
    from attnviz.ui.strings import STRINGS

    for name, title in plots.notebook.DETECTOR_TITLES.items():
        assert STRINGS[f"detector_{name}"]["en"] == title
    for direction, key in (("source_to_target", "direction_s2t"), ("target_to_source", "direction_t2s")):
        assert STRINGS[key]["en"] == plots.notebook.DIRECTION_TITLES[direction]


def test_head_figure_refuses_what_it_cannot_draw(built):
    trace = built["trace"]
    with pytest.raises(ValueError, match="kind"):
        plots.head_figure(trace, 0, 0, kind="bars")
    with pytest.raises(ValueError, match="two sentences"):
        plots.head_figure(trace, 0, 0, pair="ab")
    with pytest.raises(ValueError, match="outside"):
        plots.head_figure(trace, 6, 0)
    with pytest.raises(ValueError, match="focus"):
        plots.head_figure(trace, 0, 0, focus=len(trace.tokens))
