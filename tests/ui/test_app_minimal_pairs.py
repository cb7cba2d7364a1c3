"""AppTest of the Explore page's minimal pairs (ui/minimal_pairs.py): the Second sentence input and the built-in
pair pick, the per-head difference grid and one head's difference against a direct computation, the
preference against attnviz.readouts.preference, the URL state and the Chinese strings."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz.analysis.minimal_pairs import trace_difference
from attnviz.readouts.preference import builtin_pairs, pair_preference
from attnviz.ui.url_state import MAX_PAIR_TEXT
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, open_view, z_array

GOOD = "The keys to the cabinet are on the table."
BAD = "The keys to the cabinet is on the table."


def expander_labels(at: AppTest) -> list[str]:
    return [e.label for e in at.expander]


def test_difference_grid_and_head_match_a_direct_computation(app, minilm):
    open_view(app, "matters")
    assert "Compare two sentences (minimal pair)" in expander_labels(app)
    assert any("Type a second sentence" in info.value for info in app.info)
    app.text_input(key="text").input(GOOD).run()
    app.text_input(key="minpair_text").input(BAD).run()
    assert_clean(app)
    assert app.text_input(key="minpair_text").label == "Second sentence"
    expected = trace_difference(minilm.run(GOOD), minilm.run(BAD))
    grid = z_array(chart(app, "minpair_grid")["data"][0])
    assert grid.shape == (6, 12)
    # The app keeps float16 traces: agreement to float16's precision, not bit for bit.
    np.testing.assert_allclose(grid, expected.max_abs, atol=2e-3)
    best = np.unravel_index(np.argmax(expected.max_abs), expected.max_abs.shape)
    assert app.selectbox(key="minpair_head").value == f"{best[0]}.{best[1]}"
    app.selectbox(key="minpair_head").set_value("2.5").run()
    heatmap = chart(app, "minpair_heatmap")
    assert heatmap["data"][0]["y"][5].endswith("are→is")
    np.testing.assert_allclose(z_array(heatmap["data"][0]), expected.difference[2, 5], atol=2e-3)
    assert any("Substitution are→is, after 5 common words and before 4" in c.value for c in app.caption)
    # all-MiniLM-L6-v2 has no masked-LM head: no preference, said so.
    assert any("Preference: not available" in info.value for info in app.info)
    assert app.query_params["text_b"] == BAD  # the focus's second text (a link's old `compare` still opens it)


def test_same_words_and_insertions(app):
    open_view(app, "matters")
    app.text_input(key="text").input(GOOD).run()
    app.text_input(key="minpair_text").input(GOOD.replace(" ", "  ")).run()
    assert any("same words" in w.value for w in app.warning)
    app.text_input(key="minpair_text").input("The keys to the old cabinet are on the table.").run()
    assert_clean(app)
    heatmap = chart(app, "minpair_heatmap")
    assert "∅→old" in " ".join(heatmap["data"][0]["y"])
    z = z_array(heatmap["data"][0])
    assert np.isnan(z[4]).all() and np.isfinite(z[0, :4]).all()  # the slot only the second sentence has


def test_builtin_pair_sets_both_sentences_and_the_decoder_preference():
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "matters"
    at.query_params["model"] = SMOLLM
    at.run()
    pair = next(p for p in builtin_pairs() if p.id == "zh-mp-011")  # 他没有吃早饭。/ 他不有吃早饭。
    at.selectbox(key="minpair_builtin").set_value(pair.id).run()
    assert_clean(at)
    assert at.text_input(key="text").value == pair.good
    assert at.text_input(key="minpair_text").value == pair.bad
    table = next(d.value for d in at.dataframe if "log-probability" in d.value.columns)
    from attnviz.ui.guard import workbench
    from attnviz.workbench import shelf

    expected = pair_preference(shelf.cached_model(workbench(), SMOLLM), pair)
    assert table["log-probability"].tolist() == pytest.approx([expected.good, expected.bad], abs=1e-3)
    verdict = "prefers the Sentence" if expected.verdict_margin > 0 else "prefers the second sentence"
    assert any(verdict in m.value for m in at.markdown)
    assert any("common prefix (他)" in c.value for c in at.caption)  # the pair's own prefix method
    assert any("do not differ" in c.value for c in at.caption)  # a decoder's rows before the change


def test_link_restores_the_second_sentence_and_a_too_long_one_is_ignored():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "matters"
    at.query_params.update({"text": GOOD, "compare": BAD})
    at.run()
    assert_clean(at)
    assert at.text_input(key="minpair_text").value == BAD
    assert at.query_params["text_b"] == BAD and "compare" not in at.query_params  # the old key, read once
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "matters"
    at.query_params.update({"text": GOOD, "compare": "x" * (MAX_PAIR_TEXT + 1)})
    at.run()
    assert at.text_input(key="minpair_text").value == ""
    assert "compare" not in at.query_params and "text_b" not in at.query_params


def test_chinese_labels(app):
    open_view(app, "matters")
    app.radio(key="lang").set_value("zh").run()
    assert_clean(app)
    assert "比较两个句子（最小对立对）" in expander_labels(app)
    assert app.text_input(key="minpair_text").label == "第二个句子"
    assert app.selectbox(key="minpair_builtin").label == "内置句对"
    app.radio(key="lang").set_value("en").run()


def test_hostile_second_sentence_stays_text(app):
    open_view(app, "matters")
    app.text_input(key="text").input(GOOD).run()
    app.text_input(key="minpair_text").input(GOOD.replace("are", "**[x](http://e.x)** <b>$1$</b>")).run()
    assert_clean(app)
    caption = next(c.value for c in app.caption if c.value.startswith("Substitution"))
    # Punctuation marks are words of their own (the word rule), each escaped by md().
    assert "\\* \\* \\[ x \\] \\( http" in caption and "\\< b \\>" in caption
    ticks = chart(app, "minpair_heatmap")["layout"]["yaxis"]["ticktext"]
    assert any("&lt; b &gt;" in tick for tick in ticks) and not any("<" in tick for tick in ticks)
