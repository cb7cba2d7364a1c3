"""The Explore page's logit lens, attribution and routes sections on the offline SmolLM2: they draw without
an exception, and the attribution's line is the notebook API's own value (one run of the page)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from attnviz.readouts.attribution import attribute
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart

TEXT = "The keys to the cabinet"


def test_the_three_sections_draw_on_a_decoder(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "writes"
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = TEXT
    at.query_params["target"], at.query_params["contrast"] = " are", " is"
    at.run()
    assert_clean(at)
    for key in ("lens_curve", "lens_grid", "dla_grid", "dla_mlps", "routes_graph"):
        chart(at, key)
    grid = chart(at, "lens_grid")["data"][0]
    assert len(grid["y"]) == smollm.info.n_layers + 1
    expected = attribute(smollm, TEXT, " are", " is")
    line = next(m.value for m in at.markdown if m.value.startswith("Logit of the target minus"))
    assert f"**{expected.value:.4f}**" in line
    # the routes: the ten head nodes that carry the most, named on the graph (the full graph: ~500 nodes)
    heads = next(tr for tr in chart(at, "routes_graph")["data"] if tr.get("customdata"))
    assert len(heads["x"]) == 10 and heads["mode"] == "markers+text"
    assert all(label.startswith("L") and " H" in label for label in heads["text"])
    assert any(c.value.startswith("Shown: the 10 head nodes that carry the most") for c in at.caption)

