"""The Explore page's sink anatomy and corpus map (issue 28) on the offline MiniLM: each runs as a heavy action,
the sink grid is clickable and its ratio follows the epsilon slider, the map draws the normalised queries and
keys of the built-in sentences with escaped hovers, and both results are shared with the next visitor."""

from __future__ import annotations

import numpy as np

from attnviz.readouts import qkmap, sinks
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import assert_clean, chart, open_view, z_array


def clickable(at, key: str) -> bool:
    return [p for p in at.get("plotly_chart") if p.proto.id.endswith(f"-{key}")][0].proto.selection_mode == [0]


def test_sink_anatomy_runs_once_and_its_ratio_follows_epsilon(app, minilm):
    open_view(app, "which")
    at = app
    if [b for b in at.button if b.key == "sinks_run"]:  # another test of this process may have run it
        finish_jobs(at.button(key="sinks_run").click().run())
    assert_clean(at)
    grid = z_array(chart(at, "sinks_grid")["data"][0]).astype(np.float64)
    expected = sinks.first_token_means(minilm, sinks.builtin_texts(), max_tokens=sinks.TEXT_TOKENS)
    np.testing.assert_allclose(grid, expected, atol=1e-6)  # float32 in the figure
    assert clickable(at, "sinks_grid")
    at.slider(key="sinks_epsilon").set_value(0.1).run()
    ratio = sinks.sink_ratio(expected, 0.1)
    assert any(f"**{ratio:.3f}**" in m.value for m in at.markdown), [m.value for m in at.markdown]
    at.selectbox(key="sinks_show").set_value("cosine").run()
    assert chart(at, "sinks_grid")["data"][0]["zmid"] == 0


def test_the_corpus_map_draws_the_builtin_sentences(app, minilm):
    open_view(app, "which")
    at = app
    at.selectbox(key="qkmap_layer").set_value(2).run()
    at.selectbox(key="qkmap_head").set_value(5).run()
    at.slider(key="qkmap_n").set_value(20).run()
    finish_jobs(at.button(key="qkmap_run").click().run())
    assert_clean(at)
    figure = chart(at, "qkmap_plot")
    expected = qkmap.qk_map(minilm, qkmap.builtin_corpus("en")[:20], 2, 5)
    queries, keys = figure["data"][0], figure["data"][1]
    assert len(queries["text"]) == len(keys["text"]) == expected.n_points
    assert all("<b>" in h and "<script" not in h for h in queries["text"])
    assert queries["customdata"][0] == [0, 0] and clickable(at, "qkmap_plot")
    at.radio(key="qkmap_colour").set_value("position").run()
    assert chart(at, "qkmap_plot")["layout"]["meta"]["colour"] == "position"


def test_a_click_on_a_point_opens_its_sentence_at_that_head(monkeypatch):
    from types import SimpleNamespace

    from attnviz.ui import qkmap as section
    from attnviz.ui.focus import Focus
    from attnviz.ui.widgets import OPENED

    state = {"qkmap_plot": {"selection": {"points": [{"customdata": [1, 3]}]}}, "_focus": Focus(text_b="old")}
    monkeypatch.setattr(section.st, "session_state", state)
    section._open_sentence(SimpleNamespace(sentences=("First one.", "Second <b>one</b>."), layer=2, head=5))
    focus = state["_focus"]  # the point's sentence and head become the focus (ui/focus.py)
    assert (focus.text, focus.text_b, focus.layer, focus.head) == ("Second <b>one</b>.", "", 2, 5)
    assert state[OPENED] is True
