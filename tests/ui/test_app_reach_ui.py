"""Issue 19 (reach-ui): a decoder's first-token sink set aside, the language in the URL, lenses drawn per
layer, grids to read and to click, shared Head Finder scores, a short untrained translation, and the figures'
small fixes. AppTest on the real pages; the numbers against attnviz.analysis on the same text."""

from __future__ import annotations

import colorsys
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz import plots
from attnviz.analysis import attention_lenses
from attnviz.analysis.profile import profile_head
from attnviz.plots.colors import NEGATIVE_COLOR, POSITIVE_COLOR
from attnviz.ui.strings import translate
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, FINDER, TIMEOUT, TRANSLATE, assert_clean, chart, open_view, z_array

TEXT = "The keys to the cabinet are on the table."
SHORT = "Dogs bark at night."


def plotly_proto(at: AppTest, key: str):
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith(f"-{key}"):
            return element.proto
    raise AssertionError(f"no chart {key!r}")


def clickable(at: AppTest, key: str) -> bool:
    """The chart returns point selections (st.plotly_chart(on_select=..., selection_mode="points"))."""
    return list(plotly_proto(at, key).selection_mode) == [0]  # PlotlyChart.SelectionMode.POINTS


def profile_table(at: AppTest):
    return next(d.value for d in at.dataframe if "entropy (nats)" in d.value.columns)


# --- item 3: the first token set aside ----------------------------------------------------------------


def test_a_decoder_can_set_its_first_token_aside_and_reports_the_first_token_share(smollm):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, "text": TEXT, "layer": "5", "head": "2"})
    at.run()
    assert_clean(at)
    assert [w for w in at.toggle if w.key == "first_aside"], "no 'Set the first token aside' option"
    from attnviz.analysis.sink import first_token_aside, first_token_share

    trace = smollm.run(TEXT)
    share = first_token_share(trace.attentions)
    assert share.share_above > 0.5  # SmolLM2: most heads are sinks on this sentence
    line = translate("en", "first_token_line", mean=share.mean, above=share.above, heads=share.per_head.size,
                     share=share.share_above, epsilon=0.3)
    assert line in [c.value for c in at.caption]
    assert profile_table(at)["first-token share"][0] == pytest.approx(profile_head(trace, 5, 2)["first"], abs=2e-3)
    before = z_array(chart(at, "head_heatmap")["data"][0])
    assert before.shape == (len(trace.tokens),) * 2

    at.toggle(key="first_aside").set_value(True).run()
    assert_clean(at)
    assert at.query_params["first_aside"] == "1"
    after = z_array(chart(at, "head_heatmap")["data"][0]).astype(np.float64)
    assert after.shape == (len(trace.tokens) - 1,) * 2  # the first token's row and column are set aside
    expected = first_token_aside(trace.attentions)[5, 2, 1:, 1:]
    np.testing.assert_allclose(np.nan_to_num(after), expected, atol=3e-3)
    np.testing.assert_allclose(np.nansum(after, axis=1), 1, atol=3e-3)  # each row renormalised
    assert np.any(np.abs(np.nan_to_num(after) - np.nan_to_num(before[1:, 1:])) > 0.05)
    # the profile still reports the share the option sets aside, and says so
    assert profile_table(at)["first-token share"][0] == pytest.approx(profile_head(trace, 5, 2)["first"], abs=2e-3)
    assert any("before the first token was set aside" in c.value for c in at.caption)
    at.radio(key="level").set_value("word").run()  # the word view pools the other tokens
    assert_clean(at)
    words = z_array(chart(at, "head_heatmap")["data"][0]).astype(np.float64)
    np.testing.assert_allclose(np.nansum(words, axis=1)[1:], 1, atol=3e-3)

    linked = AppTest.from_file(APP, default_timeout=TIMEOUT)
    linked.query_params.update({"model": SMOLLM, "text": TEXT, "first_aside": "1"})
    linked.run()
    assert linked.toggle(key="first_aside").value is True
    bad = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bad.query_params.update({"model": SMOLLM, "text": TEXT, "first_aside": "yes"})
    bad.run()
    assert_clean(bad)
    assert bad.toggle(key="first_aside").value is False


def test_an_encoder_has_no_first_token_option():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    assert not [w for w in at.toggle if w.key == "first_aside"]


# --- item 4: the language in the URL ---------------------------------------------------------------------


def test_a_link_opens_in_its_language_and_placeholders_are_translated():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"lang": "zh", "text": SHORT})
    at.run()
    assert_clean(at)
    assert at.radio(key="lang").value == "zh" and at.title[0].value.startswith("attnviz：")
    assert at.query_params["lang"] == "zh"  # kept for the next link
    placeholders = {w.key: w.placeholder for w in at.selectbox if w.key in ("explore_source", "explore_target")}
    assert placeholders == {"explore_source": "请选择", "explore_target": "请选择"}
    open_view(at, "matters")  # the ablation's multiselects
    assert {w.placeholder for w in at.multiselect} == {"请选择（可多选）"}
    at.radio(key="lang").set_value("en").run()
    assert "lang" not in at.query_params
    assert at.selectbox(key="explore_source").placeholder == "Choose an option"
    unknown = AppTest.from_file(APP, default_timeout=TIMEOUT)
    unknown.query_params.update({"lang": "fr"})
    unknown.run()
    assert_clean(unknown)
    assert unknown.radio(key="lang").value == "en" and "lang" not in unknown.query_params


# --- item 6: rollout and flow draw one map per layer ----------------------------------------------------


def test_rollout_draws_one_map_per_layer_with_the_head_choice_off_and_its_own_profile(minilm):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"text": SHORT, "layer": "2", "head": "4", "lens": "rollout"})
    at.run()
    assert_clean(at)
    mosaic = chart(at, "model_view")
    # 6 layers + the mean row; one column of tiles and no mean column; 7 tokens with 1-cell gaps
    assert z_array(mosaic["data"][0]).shape == (7 * 8 - 1, 7)
    assert mosaic["layout"]["xaxis"]["ticktext"] == ["all heads"]
    assert any("one map per layer" in c.value and "one column" in c.value for c in at.caption)
    head = at.selectbox(key="head")
    assert head.disabled and head.value == 4 and "one map per layer" in head.help
    from attnviz.analysis.profile import profile_map

    trace = minilm.run(SHORT)
    rolled = attention_lenses.rollout(trace.attentions)[2]
    stats = profile_map(trace, rolled)
    table = profile_table(at)
    assert table["entropy (nats)"][0] == pytest.approx(stats["entropy"], abs=2e-3)
    assert table["entropy (nats)"][0] != pytest.approx(profile_head(trace, 2, 4)["entropy"], abs=2e-3)
    assert "previous-token" not in table.columns  # detector scores are of heads, not of a layer's map
    assert any("rollout map of layer 2" in c.value for c in at.caption)
    at.radio(key="lens").set_value("raw").run()
    assert not at.selectbox(key="head").disabled
    assert z_array(chart(at, "model_view")["data"][0]).shape == (7 * 8 - 1, 13 * 8 - 1)


# --- item 7: grids to read and to click -------------------------------------------------------------------


def test_signed_grids_diverge_at_zero_and_small_values_stay_apart():
    grid = np.array([[0.0004, -0.0012, 0.003], [0.0071, 0.0123, -0.0005]])
    figure = plots.score_grid(grid, "scan", diverging=True)
    heat = figure.data[0]
    assert heat.zmid == 0 and heat.zmin == -heat.zmax == pytest.approx(-0.0123, rel=1e-3)
    assert heat.colorscale[0][1] != heat.colorscale[-1][1]  # two hues, white in the middle
    assert figure.layout.meta["values"] == ".2g" and heat.texttemplate == "%{text}"
    shown = [text for row in heat.text for text in row]
    assert shown == ["0.0004", "-0.0012", "0.003", "0.0071", "0.012", "-0.0005"]  # two significant digits
    assert len(set(shown)) == grid.size  # at two decimals they read 0.00, -0.00, 0.00, 0.01, 0.01, -0.00
    noise = plots.score_grid(np.array([[9.3e-15, 0.5, np.nan]]), "noise")
    assert [t for row in noise.data[0].text for t in row] == ["0", "0.5", ""]  # float noise prints as 0
    assert heat.textfont.size >= 11
    accuracies = plots.score_grid(np.array([[0.5, 0.25, 0.0]]), "accuracy")
    assert [list(row) for row in accuracies.data[0].text] == [["0.50", "0.25", "0.00"]]
    assert accuracies.data[0].zmid is None
    wide = plots.score_grid(np.zeros((2, 32)), "many heads")  # too narrow cells: values on hover only
    assert wide.data[0].texttemplate == "" and wide.layout.meta["values"] == "hover"
    picks = figure.data[1]  # one invisible point per cell: what a click selects
    assert sorted(map(tuple, picks.customdata)) == [(layer, head) for layer in range(2) for head in range(3)]
    assert all(isinstance(v, int) for pair in picks.customdata for v in pair)


def test_the_scan_and_detector_grids_are_readable_and_clickable():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"text": SHORT, "view": "matters"})  # the scan is under "Does it matter"
    at.run()
    if [b for b in at.button if b.key == "ablation_scan_run"]:  # another test of this process may have run it
        finish_jobs(at.button(key="ablation_scan_run").click().run())
    assert_clean(at)
    scan = chart(at, "ablation_scan")["data"][0]
    values = z_array(scan).astype(np.float64)
    assert values.shape == (6, 12) and np.nanmedian(np.abs(values)) < 0.01  # MiniLM's embedding changes are small
    assert scan["zmid"] == 0 and scan["zmin"] == pytest.approx(-scan["zmax"])
    printed = [text for row in scan["text"] for text in row]
    assert len(set(printed)) > 20  # at two decimals nearly all read 0.00 or 0.01
    assert len({f"{v:.2f}" for v in values.ravel()}) < 15
    assert clickable(at, "ablation_scan")
    open_view(at, "which")  # the detectors are under "Which heads"
    if [b for b in at.button if b.key == "detectors_run"]:
        finish_jobs(at.button(key="detectors_run").click().run())
    assert_clean(at)
    for name in ("previous_token", "duplicate_token", "induction"):
        detector = chart(at, f"detector_{name}")["data"][0]
        assert detector["textfont"]["size"] >= 11 and clickable(at, f"detector_{name}")


def test_head_finder_and_translate_grids_are_clickable_and_builtin_scores_are_shared():
    require_offline(MINILM)
    from attnviz.ui.guard import workbench

    workbench.clear()  # a fresh Workbench: an earlier test of this process may have shared these scores already
    first = AppTest.from_file(FINDER, default_timeout=TIMEOUT).run()
    assert [b for b in first.button if b.key == "run_probe"], ([e.value for e in first.exception],
                                                                [e.value for e in first.error],
                                                                [c.value for c in first.caption][:5])
    finish_jobs(first.button(key="run_probe").click().run())
    assert_clean(first)
    assert clickable(first, "score_grid_source_to_target") and clickable(first, "score_grid_target_to_source")
    grid = z_array(chart(first, "score_grid_source_to_target")["data"][0])
    # another visitor (a new session of the same process): the scores are there without scoring again
    second = AppTest.from_file(FINDER, default_timeout=TIMEOUT).run()
    assert_clean(second)
    assert not [b for b in second.button if b.key == "run_probe"]
    np.testing.assert_array_equal(z_array(chart(second, "score_grid_source_to_target")["data"][0]), grid)
    assert any("shared by every visitor" in c.value for c in second.caption)
    translate_page = AppTest.from_file(TRANSLATE, default_timeout=TIMEOUT).run()
    assert_clean(translate_page)
    assert clickable(translate_page, "translate_mosaic")


# --- item 8 (third bullet): an untrained translation model --------------------------------------------------


def test_the_untrained_translation_model_decodes_a_few_tokens_and_offers_a_readable_example():
    at = AppTest.from_file(TRANSLATE, default_timeout=TIMEOUT).run()
    assert_clean(at)
    rows = chart(at, "translate_head_view")["data"][0]["y"]
    assert 1 < len(rows) <= 8 + 1  # the start token, then at most 8 decoded (64 before)
    from attnviz.ui.translate import EXAMPLE_TARGET
    from attnviz.workbench.translate import UNTRAINED_NEW_TOKENS

    assert UNTRAINED_NEW_TOKENS == 8
    assert chart(at, "translate_mosaic")["layout"]["height"] < 1200  # 2,000 px before
    assert any(f"at most {UNTRAINED_NEW_TOKENS} tokens" in c.value for c in at.caption)
    at.button(key="translate_use_example").click().run()
    assert_clean(at)
    assert at.text_input(key="translate_target").value == EXAMPLE_TARGET
    assert "钥" in "".join(chart(at, "translate_head_view")["data"][0]["y"])  # the example's own words
    assert at.query_params["ttarget"] == EXAMPLE_TARGET


# --- item 9: the figures' small fixes -----------------------------------------------------------------------


def test_the_log_colour_bar_spreads_its_ticks():
    a = np.full((2, 2, 5, 5), 0.2, dtype=np.float32)
    for scale in ("linear", "power", "log"):
        bar = next(d for d in plots.model_view(a, scale=scale).data if d.name == "colour bar").marker.colorbar
        positions = np.asarray(bar.tickvals, dtype=float)
        assert [float(v) for v in bar.ticktext] == plots.MOSAIC_TICKS[scale]
        assert positions.min() >= 0 and positions.max() <= 1
        # at least 8% of the bar (24 px of 300) between neighbouring ticks: 0.01, 0.03 and 0.1 sat within 3%
        assert np.diff(np.sort(positions)).min() >= 0.08, (scale, positions)


def test_the_head_heatmap_has_no_blank_band_above_it():
    figure = plots.head_heatmap(np.eye(3, dtype=np.float32), ["a", "b", "c"], ["a", "b", "c"])
    assert figure.layout.margin.t is not None and figure.layout.margin.t <= 30  # plotly's default is 100 px


COLOUR_HUES = {"blue": (190, 250), "orange": (15, 45), "red": (345, 15), "green": (90, 170)}


def hue(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hsv(r, g, b)[0] * 360


def in_range(h: float, low: float, high: float) -> bool:
    return low <= h <= high if low < high else h >= low or h <= high


def test_the_query_key_caption_names_the_colours_it_draws():
    caption = translate("en", "qk_caption", head=0, layer=0, kv=0, rotary="", dim=8).lower()
    named = {name for name in COLOUR_HUES if re.search(rf"\b{name}\b", caption)}
    drawn = {POSITIVE_COLOR, NEGATIVE_COLOR}
    assert named and all(any(in_range(hue(c), *COLOUR_HUES[name]) for c in drawn) for name in named), named
    assert all(any(in_range(hue(c), *COLOUR_HUES[name]) for name in named) for c in drawn)
    zh = translate("zh", "qk_caption", head=0, layer=0, kv=0, rotary="", dim=8)
    assert "橙色" in zh and "红色" not in zh
