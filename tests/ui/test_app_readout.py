"""The Explore page's logit lens, attribution and routes sections on the offline SmolLM2: they draw without
an exception, the attribution's line is the notebook API's own value, and a target of several tokens is
refused with its pieces named."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from attnviz.interventions.attribution import attribute
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart

TEXT = "The keys to the cabinet"


def test_the_three_sections_draw_on_a_decoder(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = TEXT
    at.run()
    assert_clean(at)
    for key in ("lens_curve", "lens_grid", "dla_grid", "dla_mlps", "routes_graph"):
        chart(at, key)
    grid = chart(at, "lens_grid")["data"][0]
    assert len(grid["y"]) == smollm.info.n_layers + 1
    at.text_input(key="dla_target").input(" are").run()
    at.text_input(key="dla_contrast").input(" is").run()
    assert_clean(at)
    expected = attribute(smollm, TEXT, " are", " is")
    line = next(m.value for m in at.markdown if m.value.startswith("Logit of the target minus"))
    assert f"**{expected.value:.4f}**" in line
    at.text_input(key="dla_target").input(" qzxjvwq").run()
    assert any("not one" in w.value for w in at.warning)
