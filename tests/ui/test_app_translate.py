"""AppTest of the Translate page (app_pages/3_Translate.py, attnviz/ui/translate.py) on the offline, untrained
Marian-sized model: the three attention kinds, T != S in the head view, the word alignment, the controls'
URL state and its validation, failures that fall back, and the page in Chinese."""

from __future__ import annotations

import html
import time

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.helpers.i18n import data_words, untranslated
from tests.helpers.pages import TIMEOUT, chart, z_array
from tests.helpers.pages import TRANSLATE as PAGE

TARGET = "抽屉里的钥匙不见了。"


def page(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def axis_tokens(figure: dict, axis: str) -> list[str]:
    """The tick labels as the visitor reads them (plots escape them as HTML)."""
    return [html.unescape(label) for label in figure["layout"][axis]["ticktext"]]


def test_opens_offline_on_the_labelled_untrained_model():
    at = page()
    clean(at)
    assert any("untrained" in w.value for w in at.warning)
    assert "untrained" in at.selectbox(key="translate_preset").format_func(at.selectbox(key="translate_preset").value)
    assert at.radio(key="translate_kind").value == "cross"
    assert any(m.value.startswith("**Translation (greedy") for m in at.markdown)
    mosaic = chart(at, "translate_mosaic")
    assert mosaic["layout"]["meta"]["source_shape"][:2] == [6, 8]  # the original Transformer: 6 layers x 8 heads
    t, s = mosaic["layout"]["meta"]["source_shape"][2:]
    assert t != s  # cross-attention: decoder positions x source tokens
    head = chart(at, "translate_head_view")
    assert z_array(head["data"][0]).shape == (t, s)
    assert axis_tokens(head, "xaxis")[-1] == "</s>" and axis_tokens(head, "yaxis")[0] == "<pad>"


def test_target_text_is_read_and_aligned():
    at = page()
    at.text_input(key="translate_target").input(TARGET).run()
    clean(at)
    assert any(m.value.startswith("**Target text (given") for m in at.markdown)
    head = chart(at, "translate_head_view")
    rows = axis_tokens(head, "yaxis")
    assert rows[0] == "<pad>" and "".join(rows[1:]).replace("▁", "") == TARGET  # shifted right, no </s>
    grid = chart(at, "translate_alignment_grid")
    words = ["抽屉", "里", "的", "钥匙", "不见", "了", "。"]  # the word rule: jieba's words, the full stop
    assert axis_tokens(grid, "yaxis") == words
    table = at.dataframe[0].value
    # one row per target word that has a token of its own: "里的" is one piece, so "的" (whose character
    # the first-overlap rule gives to "里") has no row, and its grid row is zero
    assert list(table.iloc[:, 0]) == [w for w in words if w != "的"]
    z = z_array(grid["data"][0])
    assert np.all(z[words.index("的")] == 0) and np.all(z.sum(axis=1)[[0, 1, 3, 4]] > 0)
    weights = table.iloc[:, 2].to_numpy(dtype=float)
    assert np.all((weights > 0) & (weights <= 1.0 + 1e-6))
    assert at.query_params["ttarget"] == TARGET


def test_kinds_layers_and_heads_change_the_figures():
    at = page()
    first = z_array(chart(at, "translate_head_view")["data"][0])
    at.selectbox(key="translate_head").set_value(3).run()
    clean(at)
    assert not np.array_equal(first, z_array(chart(at, "translate_head_view")["data"][0]))
    at.radio(key="translate_kind").set_value("decoder").run()
    clean(at)
    decoder = chart(at, "translate_head_view")
    assert [d.get("name") for d in decoder["data"]] == [None, "masked"]  # the causal mask is drawn
    t = len(axis_tokens(decoder, "yaxis"))
    assert z_array(decoder["data"][0]).shape == (t, t)
    at.radio(key="translate_kind").set_value("encoder").run()
    clean(at)
    encoder = chart(at, "translate_head_view")
    assert axis_tokens(encoder, "xaxis") == axis_tokens(encoder, "yaxis")
    assert len(encoder["data"]) == 1  # nothing masked
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("-translate_alignment_grid")]
    assert at.query_params["kind"] == "encoder" and at.query_params["thead"] == "3"


def test_url_state_is_restored_and_validated():
    at = page(src="Der Hund läuft.", target=TARGET, kind="decoder", tlayer="2", thead="5")
    clean(at)
    assert at.text_area(key="translate_source").value == "Der Hund läuft."
    assert at.text_input(key="translate_target").value == TARGET
    assert at.radio(key="translate_kind").value == "decoder"
    assert (at.selectbox(key="translate_layer").value, at.selectbox(key="translate_head").value) == (2, 5)
    bad = page(kind="bogus", target="x" * 501, tlayer="99", tlang="<script>")
    clean(bad)
    assert bad.radio(key="translate_kind").value == "cross"
    assert bad.text_input(key="translate_target").value == ""
    assert bad.selectbox(key="translate_layer").value == 0  # out of range for 6 layers: reset


def test_a_model_that_is_not_for_translation_falls_back_with_a_message():
    at = page()
    at.text_input(key="translate_custom").input("sentence-transformers/all-MiniLM-L6-v2").run()
    clean(at)
    assert any("not a translation" in e.value for e in at.sidebar.error)
    assert any("untrained offline" in i.value for i in at.sidebar.info)
    assert chart(at, "translate_mosaic")["layout"]["meta"]["source_shape"][:2] == [6, 8]
    at.text_input(key="translate_custom").input("/etc").run()
    clean(at)
    assert at.sidebar.error and "/etc" not in " ".join(e.value for e in at.sidebar.error)


def test_a_hub_model_without_a_route_to_the_hub_fails_at_once(monkeypatch):
    """Issue 35, item 10: Translate took 26 s of the hub client's retries where Explore says at once that the
    server has no route to the hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = page()
    started = time.monotonic()
    at.text_input(key="translate_custom").input("Helsinki-NLP/opus-mt-en-de").run()
    took = time.monotonic() - started
    clean(at)
    assert took < 10, took
    assert any("no route to the hub" in e.value for e in at.sidebar.error)
    assert chart(at, "translate_mosaic")["layout"]["meta"]["source_shape"][:2] == [6, 8]  # the untrained one


def test_page_in_chinese():
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.run()
    at.text_input(key="translate_target").input(TARGET).run()
    clean(at)
    assert "交叉注意力" in at.radio(key="translate_kind").options
    # The data on screen and the names this page shows as they are (model family, ids, token strings).
    head = chart(at, "translate_head_view")
    data = data_words(TARGET, *axis_tokens(head, "xaxis"), *axis_tokens(head, "yaxis"),
                      "Marian opus-mt swish Helsinki-NLP/opus-mt-en-zh-de hub id pad cmn_Hans d_model "
                      "T5 BART google/flan-t5-small google-t5/t5-small facebook/bart-base flan-t5-base bart-large-cnn")
    wrong = untranslated(at, "zh", data)
    assert not wrong, "\n".join(f"{where}: {text!r}" for where, text in wrong)
