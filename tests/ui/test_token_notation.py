"""A token is one thing (issue 35, items 4 and 5): on a byte-level BPE model's Explore page no table, axis or
chip shows the vocabulary's marks (Ġ, ▁, ##) or the bytes-as-Latin-1 mojibake of a character split into
byte pieces (书 as 'ä¹¦'); and a target typed without the leading space the model's words carry is named,
with the spaced token offered, whose value is then the notebook API's."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.readouts.attribution import attribute
from attnviz.ui.url_state import EXPLORE_VIEWS
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean, open_view

# 书 is two byte-level pieces for SmolLM2, the emoji four; the rest is plain ASCII, so any letter from
# U+0080 to U+024F on the page is the vocabulary's notation leaking (Ġ is U+0120, ä U+00E4).
TEXT = "The keys to the 书 cabinet 🙂 are"
LEAKED = re.compile(r"[\u0080-\u00b6\u00b8-\u024f\u2581\ufffd]|##")  # U+00B7 · is our separator


def strings(value):
    """Every string inside a figure's or a table's JSON."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_a_bpe_models_page_shows_each_token_as_its_text(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = TEXT
    at.query_params["text_b"] = TEXT.replace("keys", "key")
    at.query_params["target"], at.query_params["contrast"] = " are", " is"
    shown = {}
    for view in EXPLORE_VIEWS:  # every tab's tables and figures
        open_view(at, view)
        assert_clean(at)
        for element in at.get("plotly_chart"):
            figure = json.loads(element.proto.spec)
            for trace in figure.get("data", []):  # axis labels, hover text and tile labels
                shown[f"chart {element.proto.id}"] = [s for key in ("x", "y", "text", "hovertext", "customdata")
                                                      for s in strings(trace.get(key))]
            shown[f"chart {element.proto.id} axes"] = [s for name, axis in figure.get("layout", {}).items()
                                                       if name.startswith(("xaxis", "yaxis"))
                                                       for s in strings(axis.get("ticktext"))]
        for k, table in enumerate(at.dataframe):
            frame = table.value
            shown[f"{view} table {k}"] = [str(c) for c in frame.columns] + [str(v) for v in frame.to_numpy().ravel()]
        shown[f"{view} markdown"] = [m.value for m in at.markdown]
    assert len([name for name in shown if name.startswith("chart")]) >= 8
    assert len([name for name in shown if " table " in name]) >= 3
    leaks = {name: sorted({s for s in texts if LEAKED.search(s)})[:5] for name, texts in shown.items()}
    assert not {name: found for name, found in leaks.items() if found}
    # the character and the emoji are there, joined from their pieces (书[1/2], 书[2/2])
    every = " ".join(s for texts in shown.values() for s in texts)
    assert "书" in every and "🙂" in every


def test_a_target_without_its_space_is_named_and_the_spaced_one_offered(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The keys to the cabinet"
    at.query_params["target"], at.query_params["contrast"] = "are", " is"
    at.query_params["view"] = "writes"
    at.run()
    assert_clean(at)
    offers = [b.key for b in at.button if b.key and b.key.endswith("_spaced")]
    assert set(offers) == {"lens_target_spaced", "dla_target_spaced"}  # every target box
    assert any("“are” has no leading space" in c.value and "␣are" in c.value for c in at.caption)
    # the pair's target box of patching and of the circuit of heads (one function draws both: ui/patching.pair_inputs)
    assert [b.key for b in open_view(at, "matters").button if b.key and b.key.endswith("_spaced")] == [
        "patch_target_spaced", "circuit_target_spaced"]
    open_view(at, "writes")
    at.button(key="dla_target_spaced").click().run()
    assert_clean(at)
    assert at.query_params["target"] == " are" and not [b for b in at.button if b.key and b.key.endswith("_spaced")]
    expected = attribute(smollm, "The keys to the cabinet", " are", " is")
    line = next(m.value for m in at.markdown if m.value.startswith("Logit of the target minus"))
    assert f"**{expected.value:.4f}**" in line


def test_a_refused_target_names_its_pieces_as_text_and_bytes(smollm):
    """An emoji target (three byte-level pieces for SmolLM2) was refused as three U+FFFD; a spaced word as
    'Ġare'. The message names each piece as its text, a piece of a character as its bytes."""
    from attnviz.interventions.patching import single_token
    from attnviz.readouts.recorded_run import token_id

    for refuse in (lambda text: token_id(smollm, text), lambda text: single_token(smollm, text)):
        with pytest.raises(ValueError) as emoji:
            refuse("🦒")  # three pieces: f0 9f, a6, 92
        assert "\ufffd" not in str(emoji.value) and "⟨f0 9f" in str(emoji.value), emoji.value
        with pytest.raises(ValueError) as words:
            refuse(" are on")
        assert "' are' + ' on'" in str(words.value) and "Ġ" not in str(words.value), words.value
