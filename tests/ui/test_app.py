"""AppTest smoke and behaviour tests of every page: figures must change, not only widget values."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz.readouts.qk_attribution import qk_attribution
from attnviz.ui.escape import md
from tests.conftest import MINILM, ROOT, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, open_view, z_array

PAGES = sorted(str(p) for p in (ROOT / "app_pages").glob("*.py"))


def test_main_page_opens_on_a_pretrained_model(app):
    assert app.selectbox(key="model_preset").value == MINILM
    assert "random" not in " ".join(w.value for w in app.warning).lower()
    grid = chart(app, "model_view")["data"][0]
    assert grid["type"] == "heatmap"
    # 6 layers + mean row, 12 heads + mean column, 12 tokens per tile with 1-cell gaps
    assert z_array(grid).shape == (7 * 13 - 1, 13 * 13 - 1)


def test_sentence_change_redraws_the_grid(app):
    before = z_array(chart(app, "model_view")["data"][0])
    app.text_input(key="text").input("Dogs bark.").run()
    assert_clean(app)
    after = chart(app, "model_view")["data"][0]
    assert z_array(after).shape == (7 * 6 - 1, 13 * 6 - 1) != before.shape  # [CLS] dogs bark . [SEP]
    assert any("bark" in label for label in after["y"])


def test_layer_and_head_change_the_head_figure(app):
    app.text_input(key="text").input("The keys to the cabinet are on the table.").run()
    first = z_array(chart(app, "head_heatmap")["data"][0])
    app.selectbox(key="layer").set_value(3).run()
    app.selectbox(key="head").set_value(5).run()
    assert_clean(app)
    second = z_array(chart(app, "head_heatmap")["data"][0])
    assert first.shape == second.shape and not np.allclose(first, second)
    assert app.query_params["layer"] == "3" and app.query_params["head"] == "5"


def test_word_level_and_hide_special_toggles_change_the_figure(app):
    app.text_input(key="text").input("The keys to the cabinet are on the table.").run()
    tokens = chart(app, "head_heatmap")["data"][0]
    app.toggle(key="hide_special").set_value(True).run()
    hidden = chart(app, "head_heatmap")["data"][0]
    assert z_array(hidden).shape == (10, 10) and z_array(tokens).shape == (12, 12)
    np.testing.assert_allclose(np.nansum(z_array(hidden), axis=1), 1, atol=1e-3)
    app.toggle(key="hide_special").set_value(False).run()
    app.radio(key="level").set_value("word").run()
    assert_clean(app)
    words = chart(app, "head_heatmap")["data"][0]
    assert z_array(words).shape == (10, 10)  # 9 words and the full stop


def test_token_focus_ranks_heads_and_outlines_them(app):
    app.text_input(key="text").input("The keys to the cabinet are on the table.").run()
    app.selectbox(key="explore_source").set_value(1).run()  # keys
    app.selectbox(key="explore_target").set_value(5).run()  # are
    assert_clean(app)
    table = app.dataframe[0].value
    assert list(table.columns) == ["head", "attention"] and table["attention"].is_monotonic_decreasing
    assert table["head"].str.fullmatch(r"L\d+ H\d+").all()  # one head label everywhere
    shapes = chart(app, "model_view")["layout"].get("shapes", [])
    assert len([s for s in shapes if s.get("line", {}).get("color")]) >= 5


HOSTILE = [
    ("", "Type a sentence"),
    ("   \n\t ", "Type a sentence"),
    ("word " * 4000, "longer than 512 tokens"),
    ("I ❤️ 🐶🐱 emoji 👩‍👩‍👧", None),
    ('<b>bold</b> <a href="javascript:alert(1)">x</a> <script>alert(2)</script>', None),
    ("שלום עולם مرحبا بالعالم", None),
]


@pytest.mark.parametrize("level", ["token", "word"])
@pytest.mark.parametrize("text,message", HOSTILE)
def test_hostile_text_gives_a_message_or_a_view(app, text, message, level):
    app.session_state["level"] = level  # the radio is not drawn while the text is empty
    app.text_input(key="text").input(text).run()
    assert_clean(app)
    shown = " ".join(e.value for e in [*app.info, *app.warning, *app.error])
    if message:
        assert message in shown
    if text.strip():
        figure = json.dumps(chart(app, "model_view"))
        for raw in ("<script>", "<b>bold", '<a href="javascript'):
            assert raw not in figure
    for shown_text in [*app.markdown, *app.get("html")]:
        assert "<script>" not in shown_text.proto.body and "<b>bold" not in shown_text.proto.body
        assert "&amp;lt;" not in shown_text.proto.body  # escaped once (shows "<"), not twice (shows "&lt;")
    if "<b>" in text:
        assert any("&lt;" in chips.proto.body for chips in app.get("html"))  # the chips show the "<" of the text
    app.session_state["level"] = "token"


def test_link_restores_the_view_and_bad_links_are_ignored():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    view = {"text": "Dogs bark loudly.", "layer": "4", "head": "11", "level": "word", "scale": "log",
            "palette": "blues", "threshold": "0.1"}
    at.query_params.update(view)
    at.run()
    assert_clean(at)
    assert at.text_input(key="text").value == "Dogs bark loudly."
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (4, 11)
    assert (at.radio(key="level").value, at.radio(key="scale").value, at.selectbox(key="palette").value,
            at.slider(key="threshold").value) == ("word", "log", "blues", 0.1)
    assert chart(at, "model_view")["layout"]["meta"]["scale"] == "log"  # the mosaic follows the scale too
    assert {key: at.query_params[key] for key in view} == view  # and the URL keeps the whole view
    for bad in ({"layer": "abc", "head": "-1", "level": "x", "scale": "<b>", "threshold": "0.9"},
                {"layer": "99", "head": "500", "palette": "", "threshold": "1e-1"}):
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.query_params.update(bad)
        at.run()
        assert_clean(at)
        assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (0, 0)
        assert (at.radio(key="level").value, at.radio(key="scale").value, at.slider(key="threshold").value) == (
            "token", "linear", 0.02)


def test_language_and_model_survive_a_page_switch():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.radio(key="lang").set_value("zh").run()
    at.switch_page("app_pages/1_Head_Finder.py").run()
    assert_clean(at)
    assert at.radio(key="lang").value == "zh" and at.title[0].value == "注意力头查找器"
    assert at.selectbox(key="model_preset").value == MINILM


def test_language_switch_changes_labels(app):
    app.radio(key="lang").set_value("zh").run()
    assert_clean(app)
    assert app.title[0].value.startswith("attnviz：")
    app.radio(key="lang").set_value("en").run()


def test_decoder_model_shows_gqa_groups_and_predictions():
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The capital of France is"
    at.run()
    assert_clean(at)
    grid = chart(at, "model_view")
    assert any("kv" in str(label) for label in grid["layout"]["xaxis"]["ticktext"])
    assert "masked" in json.dumps(chart(at, "head_heatmap"))
    open_view(at, "writes")
    # the predictions' table: the first of token and probability (the readout sections' tables follow it)
    tokens = next(d.value for d in at.dataframe if list(d.value.columns) == ["token", "probability"])["token"].tolist()
    assert any("Paris" in token for token in tokens)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs(page):
    at = AppTest.from_file(page, default_timeout=TIMEOUT).run()
    assert_clean(at)


def test_head_finder_page_matches_the_cli(minilm, capsys):
    """The page and `python -m attnviz probe --json` give the same numbers for the same items."""
    from attnviz.__main__ import main

    at = AppTest.from_file(str(ROOT / "app_pages" / "1_Head_Finder.py"), default_timeout=TIMEOUT).run()
    at.selectbox(key="finder_relation").set_value("subject-verb").run()
    finish_jobs(at.button(key="run_probe").click().run())
    assert_clean(at)
    page_block = at.session_state["finder_result"][1]
    assert main(["probe", "--model", MINILM, "--probes", "builtin:en", "--relation", "subject-verb", "--json"]) == 0
    cli_block = json.loads(capsys.readouterr().out)["relations"]["subject-verb"]
    assert page_block == cli_block
    best = cli_block["best"]["source_to_target"]
    assert f"L{best['layer']} H{best['head']}" in at.dataframe[0].value["best head"].tolist()
    assert len([e for e in at.expander if e.label.startswith(("✅", "❌"))]) >= 2


def test_a_head_that_tops_several_relations_is_said_so(minilm):
    """Issue 35, item 10: one head topping several relations (MiniLM's L3 H1: subject-verb, coreference,
    modifier by the built-in English set) is said, from the scores already computed."""
    at = AppTest.from_file(str(ROOT / "app_pages" / "1_Head_Finder.py"), default_timeout=TIMEOUT).run()
    blocks = {}
    for relation in ("subject-verb", "coreference"):
        at.selectbox(key="finder_relation").set_value(relation).run()
        if [b for b in at.button if b.key == "run_probe"]:  # another test may have shared these scores
            finish_jobs(at.button(key="run_probe").click().run())
        assert_clean(at)
        blocks[relation] = at.session_state["finder_result"][1]
    heads = [{(b["layer"], b["head"]) for b in blocks[r]["best"].values() if b} for r in blocks]
    shared = heads[0] & heads[1]
    assert shared  # the case the note is for
    said = " ".join(i.value for i in at.info).replace("\\", "")
    assert all(f"L{layer} H{head} is also the best head for subject-verb" in said for layer, head in shared), said


def test_parity_badge_reports_the_difference(app):
    app.text_input(key="text").input("The keys to the cabinet are on the table.").run()
    open_view(app, "check").button(key="parity").click().run()
    assert_clean(app)
    assert any("max |Δ attention|" in s.value and "bound 1e-5" in s.value for s in app.success)


def test_learn_page_runs_the_real_module_for_each_variant():
    at = AppTest.from_file(str(ROOT / "app_pages" / "2_Learn.py"), default_timeout=TIMEOUT).run()
    assert_clean(at)
    table = at.dataframe[0].value  # GQA by default: 8 query heads on 2 KV heads
    assert table["variant"][0] == "GQA" and table["attn"][0] == "(2, 8, 10, 10)"
    at.select_slider(key="learn_kv_heads").set_value(8).run()
    assert at.dataframe[0].value["variant"][0] == "MHA"
    at.select_slider(key="learn_kv_heads").set_value(2).run()
    table = at.dataframe[0].value
    assert table["variant"][0] == "GQA" and table["query head -> KV head"][0].startswith("0→0 1→0 2→0 3→0 4→1")
    assert table["KV cache per token (floats)"][0] == 2 * 2 * 64
    at.select_slider(key="learn_kv_heads").set_value(1).run()
    assert at.dataframe[0].value["variant"][0] == "MQA"
    assert any(MINILM in d.value.columns for d in at.dataframe)  # the loaded model beside the original Transformer


def test_unknown_model_id_gives_a_message_and_falls_back(monkeypatch):
    """No network here: an unknown hub id fails with a clear message, once, and the page keeps working
    on the offline model (the failure is remembered, not retried on every rerun)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.text_input(key="model_custom").input("nobody/no-such-model-xyz").run()
    assert_clean(at)
    errors = " ".join(e.value for e in at.error)
    assert f"Could not get {md('nobody/no-such-model-xyz')} from the Hugging Face hub" in errors
    assert chart(at, "model_view")["data"][0]["type"] == "heatmap"  # still drawn, on the fallback model
    assert "nobody/no-such-model-xyz" in at.session_state["load_failures"]
    at.text_input(key="text").input("Dogs bark.").run()  # a rerun does not try the hub again
    assert_clean(at)
    assert f"Could not get {md('nobody/no-such-model-xyz')}" in " ".join(e.value for e in at.error)


def test_head_detectors_grids_and_profile(app):
    app.text_input(key="text").input("The keys to the cabinet are on the table.").run()
    finish_jobs(open_view(app, "which").button(key="detectors_run").click().run())
    assert_clean(app)
    grids = {name: z_array(chart(app, f"detector_{name}")["data"][0])
             for name in ("previous_token", "duplicate_token", "induction")}
    assert all(grid.shape == (6, 12) for grid in grids.values())
    assert grids["previous_token"][0, 2] > 0.9  # MiniLM's L0 H2 attends to the previous token
    open_view(app, "looks")  # the one head's profile, in the head detail
    profile = next(d.value for d in app.dataframe if "previous-token" in d.value.columns)
    assert set(profile.columns) >= {"previous-token", "duplicate-token", "induction"}


def test_long_input_keeps_the_head_detail_readable(app):
    """Past 96 tokens the head detail shows a window of them (a slider picks it); the mosaic shows all."""
    app.text_input(key="text").input(" ".join(f"The keys to cabinet {i} are on the table." for i in range(30))).run()
    assert_clean(app)
    first = chart(app, "head_heatmap")["data"][0]["y"]
    assert len(first) == 96 and chart(app, "model_view")["layout"]["meta"]["source_shape"][2] > 96
    app.slider(key="window_start").set_value(50).run()
    moved = chart(app, "head_heatmap")["data"][0]["y"]
    assert len(moved) == 96 and moved[:46] != first[:46] and [m.split(":", 1)[1] for m in moved[:46]] == [
        f.split(":", 1)[1] for f in first[50:]]  # the same tokens, 50 further on
    assert app.query_params["start"] == "50"


def test_hide_special_says_why_it_is_off(app):
    app.text_input(key="text").input("Dogs bark.").run()
    app.radio(key="level").set_value("word").run()
    toggle = app.toggle(key="hide_special")
    assert toggle.disabled and "word" in toggle.help
    app.radio(key="level").set_value("token").run()
    assert not app.toggle(key="hide_special").disabled


def test_sentence_b_is_the_decoders_second_sentence_and_comes_back():
    """One second text (the focus's): an encoder's sentence B is a decoder's minimal pair's second sentence."""
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["text_b"] = "It is raining."
    at.run()
    at.selectbox(key="model_preset").set_value(SMOLLM).run()
    assert_clean(open_view(at, "matters"))
    assert at.text_input(key="minpair_text").value == "It is raining."
    at.selectbox(key="model_preset").set_value(MINILM).run()
    assert at.text_input(key="text_b").value == "It is raining."


def test_the_query_key_views_attribution_splits_the_score_it_names(app, minilm):
    """attnviz/ui/qk_attribution.py: off until asked; then the model's score split into terms whose matrix
    adds up to the score, the largest told as sentences, grouped by layer on request, a second key's
    difference."""
    text = "The keys to the cabinet are on the table."
    app.text_input(key="text").input(text).run()
    app.selectbox(key="layer").set_value(2).run()
    app.selectbox(key="head").set_value(5).run()
    app.session_state["qk_open"] = True  # the query-key expander is lazy
    app.run()
    app.selectbox(key="qk_query").set_value(3).run()
    assert not [s for s in app.selectbox if s.key == "qka_key"]  # off: no extra pass
    app.toggle(key="qka_on").set_value(True).run()
    app.selectbox(key="qka_key").set_value(1).run()
    assert_clean(app)
    expected = qk_attribution(minilm, text, 2, 5, 3, 1)
    grouped = z_array(chart(app, "qka_matrix")["data"][0]).astype(float)  # by layer first
    assert abs(grouped.sum() - expected.score) <= 1e-3  # float32 cells
    assert any(f"Score {expected.score:.4f}" in c.value for c in app.caption)
    sentences = next(m.value for m in app.markdown if m.value.startswith("- query from"))
    assert sentences.count("\n") == 9 and "×" in sentences and ".H" not in sentences  # heads as L2 H5
    app.toggle(key="qka_grouped").set_value(False).run()
    matrix = z_array(chart(app, "qka_matrix")["data"][0]).astype(float)
    assert grouped.shape[0] < matrix.shape[0] and abs(matrix.sum() - expected.score) <= 1e-3
    app.selectbox(key="qka_key2").set_value(4).run()
    assert_clean(app)
    assert any("Why key 1 beats key 4" in c.value for c in app.caption)
    app.toggle(key="qka_on").set_value(False).run()
