"""AppTest of the circuit view (attnviz/ui/circuit_view.py) on SmolLM2 with the issue's built-in pair: the graph,
the faithfulness line and the checked edges against attnviz.interventions.circuit run directly, in both
languages (every visible string in the language chosen, as tests/ui/test_i18n.py's rule reads them)."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from attnviz.interventions import circuit as circuits
from attnviz.interventions import patching
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.workbench.circuit import CHECKED, CONTROLS
from tests.conftest import SMOLLM
from tests.helpers import circuit_page
from tests.helpers.i18n import data_words, walk
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import TIMEOUT, assert_clean


def script():
    from tests.helpers.circuit_page import page

    page()


def test_circuit_view_draws_what_the_engine_computes(smollm):
    circuit_page.use(smollm, SMOLLM)
    at = AppTest.from_function(script, default_timeout=TIMEOUT).run()
    assert_clean(at)
    at.selectbox(key="circuit_pair").set_value("en-agree-1").run()
    spec = next(p for p in builtin_patch_pairs() if p.id == "en-agree-1")
    assert (at.text_input(key="circuit_clean").value, at.text_input(key="circuit_corrupt").value) == (
        spec.clean, spec.corrupt)
    at.select_slider(key="circuit_size").set_value(20).run()
    finish_jobs(at.button(key="circuit_run").click().run())
    assert_clean(at)
    pair = patching.patch_pair(smollm, spec.clean, spec.corrupt, spec.target, spec.contrast)
    expected = circuits.find_circuit(smollm.module, pair, "denoise", 20, samples=CONTROLS, check=CHECKED)
    figure = json.loads(next(c for c in at.get("plotly_chart") if c.proto.id.endswith("-circuit_graph")).proto.spec)
    assert figure["layout"]["meta"]["edges"] == len(expected.circuit.edges)
    nodes = figure["data"][-1]
    assert sorted(nodes["text"]) == sorted(expected.edges.labels[n] for n in expected.circuit.nodes())
    line = next(m.value for m in at.markdown if f"**{len(expected.circuit.edges)} edges**" in m.value)
    assert f"**{expected.faithfulness:.0%}**" in line
    table = at.dataframe[0].value  # the one table: the checked edges
    assert list(table["edge"]) == [expected.edges.name(e) for e in expected.checked.edges]
    assert np.abs(table["exact"].to_numpy() - expected.checked.exact).max() < 1e-3  # rounded to 4 places
    walk(at, "zh", data_words(spec.clean, spec.corrupt))
    walk(at, "en", data_words(spec.clean, spec.corrupt))
