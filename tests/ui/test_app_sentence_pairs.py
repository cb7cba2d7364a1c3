"""AppTest of the head detail's sentence filter (A->B, B->A, A->A, B->B, as bertviz) and line direction: the
filter appears only for an encoder given a second sentence, and both change the figures, not only the
widget values."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz import plots
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.i18n import walk
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, z_array

# [CLS] the cat sat . [SEP] | it was tired . [SEP]: A holds 6 positions, B holds 5.
TEXT, TEXT_B = "The cat sat.", "It was tired."
WORDS = {"the", "cat", "sat", "it", "was", "tired"}  # data on the page, in either language


def keys(at: AppTest, kind: str) -> set[str]:
    return {w.key for w in at.get(kind)}


def lines(figure: dict) -> dict[tuple[int, int], str]:
    drawn = {}
    for trace in figure["data"]:
        if trace.get("mode") != "lines":
            continue
        y = z_array({"z": trace["y"]}) if isinstance(trace["y"], dict) else np.asarray(trace["y"], float)
        for a, b in zip(y[0::3], y[1::3]):
            drawn[(int(a), int(b))] = trace["line"]["color"]
    return drawn


@pytest.fixture(scope="module")
def app() -> AppTest:
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["text"] = TEXT
    at.run()
    assert_clean(at)
    return at


def test_filter_appears_only_with_a_second_sentence(app):
    assert "pair_filter" not in keys(app, "radio") and "line_direction" in keys(app, "radio")
    assert not [s for s in chart(app, "head_heatmap")["layout"].get("shapes", []) if "divider" in s["name"]]
    app.text_input(key="text_b").input(TEXT_B).run()
    assert_clean(app)
    assert app.radio(key="pair_filter").value == "all"
    assert app.radio(key="pair_filter").options == ["All", "A → B", "B → A", "A → A", "B → B"]
    heatmap = chart(app, "head_heatmap")
    dividers = [s for s in heatmap["layout"]["shapes"] if "divider" in s["name"]]
    at = {(s["name"], s["y0"] if s["name"] == "divider rows" else s["x0"]) for s in dividers}
    assert at == {("divider rows", 5.5), ("divider columns", 5.5)}  # before "it", the first token of B
    assert {s["name"] for s in chart(app, "head_view")["layout"]["shapes"]} == {"divider left", "divider right"}


def test_filter_slices_the_figures_and_joins_the_link(app):
    app.text_input(key="text_b").input(TEXT_B).run()
    full = z_array(chart(app, "head_heatmap")["data"][0])
    assert full.shape == (11, 11)
    app.radio(key="pair_filter").set_value("ab").run()
    assert_clean(app)
    heatmap = chart(app, "head_heatmap")["data"][0]
    np.testing.assert_allclose(z_array(heatmap), full[:6, 6:], atol=1e-6)  # A's rows, B's columns, as they were
    assert heatmap["y"][0].endswith("[CLS]") and heatmap["y"][-1].endswith("[SEP]")
    assert [x.split(":", 1)[1] for x in heatmap["x"]] == ["It", "was", "tired", ".", "[SEP]"]
    assert app.query_params["pair"] == "ab"
    app.radio(key="pair_filter").set_value("bb").run()
    assert z_array(chart(app, "head_heatmap")["data"][0]).shape == (5, 5)
    app.radio(key="pair_filter").set_value("all").run()
    assert "pair" not in app.query_params


def test_line_direction_draws_incoming_lines(app):
    app.text_input(key="text_b").input(TEXT_B).run()
    app.radio(key="pair_filter").set_value("all").run()
    app.slider(key="threshold").set_value(0.0).run()
    app.selectbox(key="focus").set_value(2).run()  # "cat"
    outgoing = lines(chart(app, "head_view"))
    assert outgoing and {row for row, _ in outgoing} == {2}
    app.radio(key="line_direction").set_value("in").run()
    assert_clean(app)
    incoming = lines(chart(app, "head_view"))
    assert incoming and {col for _, col in incoming} == {2} and set(incoming.values()) == {plots.IN_COLOR}
    assert app.query_params["lines"] == "in"
    app.radio(key="line_direction").set_value("both").run()
    assert set(lines(chart(app, "head_view"))) == set(outgoing) | set(incoming)
    # Under B -> A, "cat" (in A) has no row, but it is a column: its incoming lines come from B's rows.
    app.radio(key="pair_filter").set_value("ba").run()
    from_b = lines(chart(app, "head_view"))
    assert set(from_b) == {(i, 2) for i in range(5)}
    app.radio(key="line_direction").set_value("out").run()
    assert any("no lines" in c.value for c in app.caption)
    app.radio(key="pair_filter").set_value("all").run()
    app.selectbox(key="focus").set_value(None).run()


def test_filters_in_both_languages(app):
    app.text_input(key="text_b").input(TEXT_B).run()
    app.radio(key="pair_filter").set_value("ab").run()
    walk(app, "zh", WORDS)  # nothing English is left on the page, the new controls included
    assert app.radio(key="pair_filter").label == "句子筛选" and app.radio(key="pair_filter").value == "ab"
    assert app.radio(key="line_direction").options == ["从该词元出发", "指向该词元", "两者"]
    walk(app, "en", WORDS)
    assert app.radio(key="pair_filter").label == "Sentence filter"
    app.radio(key="pair_filter").set_value("all").run()


def test_decoder_has_no_sentence_filter():
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The capital of France is"
    at.query_params["text_b"] = "Paris"
    at.query_params["pair"] = "ab"
    at.run()
    assert_clean(at)
    assert "pair_filter" not in keys(at, "radio") and "line_direction" in keys(at, "radio")
    assert "pair" not in at.query_params
