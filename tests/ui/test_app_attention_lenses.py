"""AppTest of the Explore page's lens switch and query-key view (ui/attention_lenses.py): the figures must show
what attnviz.analysis computes for the same text, not only change."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz.analysis import attention_lenses
from attnviz.analysis.query_key import query_key
from attnviz.analysis.sink import trace_first_aside
from attnviz.analysis.views import attention_view
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, z_array

SHORT = "Dogs bark at night."  # [CLS] dogs bark at night . [SEP]: 7 tokens, under the flow limit
LONG = "The keys to the cabinet that the old man bought last year are on the kitchen table again today."


@pytest.fixture(scope="module")
def app() -> AppTest:
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    at.text_input(key="text").input(SHORT).run()
    assert_clean(at)
    return at


@pytest.fixture(scope="module")
def reference(minilm):
    trace = minilm.run(SHORT)
    norms = minilm.record(SHORT)["value_norms"]
    return trace, norms


def heatmap(at: AppTest) -> np.ndarray:
    return z_array(chart(at, "head_heatmap")["data"][0]).astype(np.float64)


def test_lenses_change_the_mosaic_and_the_head_detail_to_the_analysis_values(app, reference):
    trace, norms = reference
    app.selectbox(key="layer").set_value(2).run()
    app.selectbox(key="head").set_value(4).run()
    raw_mosaic = z_array(chart(app, "model_view")["data"][0])
    np.testing.assert_allclose(heatmap(app), trace.attentions[2, 4], atol=2e-3)

    app.radio(key="lens").set_value("value").run()
    assert_clean(app)
    assert app.query_params["lens"] == "value"
    expected = attention_lenses.value_weighted(trace.attentions, norms, normalise=True)[2, 4]
    np.testing.assert_allclose(heatmap(app), expected, atol=2e-3)
    assert not np.array_equal(z_array(chart(app, "model_view")["data"][0]), raw_mosaic)

    app.toggle(key="lens_norm").set_value(False).run()
    assert_clean(app)
    assert app.query_params["lens_norm"] == "0"
    weighted = attention_lenses.value_weighted(trace.attentions, norms)
    np.testing.assert_allclose(heatmap(app), weighted[2, 4] / weighted.max(), rtol=3e-3, atol=2e-3)
    assert any("largest value" in c.value for c in app.caption)

    app.radio(key="lens").set_value("rollout").run()
    assert_clean(app)
    mosaic = chart(app, "model_view")
    # 6 layers + mean row; one column of tiles (all heads), no mean column; 7 tokens with 1-cell gaps
    assert z_array(mosaic["data"][0]).shape == (7 * 8 - 1, 7)
    assert mosaic["layout"]["xaxis"]["ticktext"][0] == "all heads"
    np.testing.assert_allclose(heatmap(app), attention_lenses.rollout(trace.attentions)[2], atol=2e-3)
    assert app.selectbox(key="head").value == 4  # the head choice survives a per-layer lens
    assert any("one map per layer" in c.value for c in app.caption)


def test_flow_is_computed_on_request_and_drawn(app, reference):
    trace, _ = reference
    app.radio(key="lens").set_value("raw").run()  # a per-layer lens disables the head choice
    app.selectbox(key="layer").set_value(2).run()
    app.selectbox(key="head").set_value(4).run()
    app.radio(key="lens").set_value("flow").run()
    assert_clean(app)
    assert any("not computed yet" in i.value for i in app.info)
    np.testing.assert_allclose(heatmap(app), trace.attentions[2, 4], atol=2e-3)  # raw until computed
    finish_jobs(app.button(key="lens_flow_run").click().run())
    assert_clean(app)
    assert app.query_params["lens"] == "flow"
    np.testing.assert_allclose(heatmap(app), attention_lenses.flow(trace.attentions)[2], atol=2e-3)
    assert "20 tokens" in " ".join(c.value for c in app.caption)  # the limit is stated on the page


def test_flow_refuses_long_inputs_politely(app):
    app.radio(key="lens").set_value("flow").run()
    app.text_input(key="text").input(LONG).run()
    assert_clean(app)
    assert any("limited to 20 tokens" in w.value for w in app.warning)
    assert chart(app, "head_heatmap")  # raw weights are still drawn
    app.text_input(key="text").input(SHORT).run()
    app.radio(key="lens").set_value("raw").run()
    assert "lens" not in app.query_params


def open_query_key_view(app) -> None:
    """The query-key expander is lazy (on_change="rerun"): its body runs only while it is open."""
    app.session_state["qk_open"] = True
    app.run()


def test_query_key_view_explains_the_row(app, reference, minilm):
    trace, _ = reference
    app.selectbox(key="layer").set_value(1).run()
    app.selectbox(key="head").set_value(3).run()
    assert not [s for s in app.selectbox if s.key == "qk_query"]  # closed: nothing computed
    open_query_key_view(app)
    app.selectbox(key="qk_query").set_value(2).run()
    assert_clean(app)
    assert app.query_params["query"] == "2"
    recorded = minilm.record(SHORT, names=("queries", "keys"), layer=1)
    expected = query_key(recorded["queries"], recorded["keys"], trace.kv_group, 3, 2)
    bars = chart(app, "qk_bars")["data"]
    positive, negative, score = (z_array({"z": b["y"]}).astype(float) for b in bars[:3])
    np.testing.assert_allclose(positive + negative, score, atol=1e-4)
    np.testing.assert_allclose(score, expected.scores, atol=1e-4)
    products = z_array(chart(app, "qk_products")["data"][0])
    assert products.shape == (len(trace.tokens), 384 // 12)
    np.testing.assert_allclose(products.sum(axis=1), expected.scores, atol=1e-4)
    assert any("max difference" in c.value for c in app.caption)
    before = products
    app.selectbox(key="qk_query").set_value(4).run()
    assert not np.allclose(z_array(chart(app, "qk_products")["data"][0]), before)


def test_lens_and_query_come_from_a_link_and_bad_values_are_ignored():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"text": SHORT, "lens": "rollout", "query": "3"})
    at.run()
    assert_clean(at)
    assert at.radio(key="lens").value == "rollout"
    assert at.selectbox(key="qk_query").value == 3
    bad = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bad.query_params.update({"text": SHORT, "lens": "<script>", "query": "x", "lens_norm": "2"})
    bad.run()
    assert_clean(bad)
    assert bad.radio(key="lens").value == "raw"


def test_lenses_compose_with_hidden_special_tokens_and_word_level(app, reference):
    """The lens is applied to token-level weights, then the view is made as for raw weights."""
    trace, norms = reference
    app.selectbox(key="layer").set_value(2).run()
    app.selectbox(key="head").set_value(4).run()
    app.radio(key="lens").set_value("value").run()
    app.toggle(key="lens_norm").set_value(True).run()
    app.toggle(key="hide_special").set_value(True).run()
    assert_clean(app)
    keep = np.flatnonzero(~np.asarray(trace.special_mask))
    weighted = attention_lenses.value_weighted(trace.attentions, norms, normalise=True)[2, 4][np.ix_(keep, keep)]
    np.testing.assert_allclose(heatmap(app), weighted / weighted.sum(-1, keepdims=True), atol=2e-3)
    app.toggle(key="hide_special").set_value(False).run()
    app.radio(key="lens").set_value("rollout").run()
    app.radio(key="level").set_value("word").run()
    assert_clean(app)
    rolled = attention_lenses.rollout(trace.attentions)[2]
    tokens_of = [[t for t, w in enumerate(trace.word_of_token) if w == word] for word in range(len(trace.words))]
    # docs/formats.md's word attention: mean over the row word's tokens of the sum over the column word's
    expected = np.array([[rolled[np.ix_(rows, cols)].sum(axis=1).mean() for cols in tokens_of] for rows in tokens_of])
    np.testing.assert_allclose(heatmap(app), expected, atol=3e-3)
    app.radio(key="level").set_value("token").run()
    app.radio(key="lens").set_value("raw").run()


def test_query_key_view_of_a_gqa_decoder_names_rotary_and_the_kv_head(app):
    require_offline(SMOLLM)
    app.selectbox(key="model_preset").set_value(SMOLLM).run()
    assert_clean(app)
    app.selectbox(key="layer").set_value(17).run()
    app.selectbox(key="head").set_value(4).run()
    open_query_key_view(app)
    app.selectbox(key="qk_query").set_value(3).run()
    assert_clean(app)
    captions = " ".join(c.value for c in app.caption)
    assert "KV head 1, after rotary" in captions  # 9 query heads on 3 KV heads: head 4 reads KV head 1
    diff = next(c.value for c in app.caption if "max difference" in c.value)
    assert float(diff.rsplit(" ", 1)[-1].rstrip(".")) < 2e-3  # against the float16 trace
    bars = chart(app, "qk_bars")["data"]
    assert len(z_array({"z": bars[2]["y"]})) == 4  # a causal query sees itself and the 3 tokens before
    app.radio(key="lens").set_value("rollout").run()
    assert_clean(app)
    heat = heatmap(app)
    assert np.isnan(heat[np.triu_indices(len(heat), 1)]).all()  # causal: the future stays masked
    np.testing.assert_allclose(np.nansum(heat, axis=1), 1, atol=3e-3)
    app.selectbox(key="model_preset").set_value(MINILM).run()


# ~60 SmolLM2 tokens; layer 18 head 8 is a sink head (nearly all of every row on the first token)
SINK_TEXT = ("The keys to the old cabinet are on the table. The animal didn't cross the street because it was "
             "too tired, and the author that the critics praise writes beautiful books.")


@pytest.mark.slow
def test_lenses_with_the_first_token_aside_are_set_aside_in_float32(smollm):
    """A sink head's rows keep ~1e-7 off the first token: renormalised from float16 lens weights they came out
    0 or 1. The page's set-aside value and rollout views must equal the float32 weights set aside."""
    full = smollm.run(SINK_TEXT)
    norms = smollm.record(SINK_TEXT, names=("value_norms",))["value_norms"]
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, "text": SINK_TEXT, "lens": "value", "first_aside": "1",
                            "layer": "18", "head": "8"})
    finish_jobs(at.run())
    assert_clean(at)
    # each lens where float16 loses most: value layer 18 head 8 (0.24 off), rollout layer 29 (1.0 off)
    for lens, weights, layer, head, lost in (
            ("value", attention_lenses.value_weighted(full.attentions, norms, normalise=True), 18, 8, 0.1),
            ("rollout", attention_lenses.rollout(full.attentions)[:, None], 29, 0, 0.5)):
        if lens == "rollout":
            at.radio(key="lens").set_value("rollout").run()
            at.selectbox(key="layer").set_value(layer).run()
            assert_clean(at)
        expected = attention_view(trace_first_aside(replace(full, attentions=weights)), "token", True).attentions
        shown = np.nan_to_num(heatmap(at))  # nan: the causal future
        np.testing.assert_allclose(shown, expected[layer, head], atol=1e-3, err_msg=lens)
        # the same weights set aside from their float16 copy, as before: this text does reach that case
        rounded = trace_first_aside(replace(full, attentions=weights.astype(np.float16)))
        rounded_view = attention_view(rounded, "token", True).attentions[layer, head].astype(np.float64)
        assert np.abs(rounded_view - expected[layer, head]).max() > lost, lens
