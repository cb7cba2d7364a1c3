"""One focus through every page (issue 35): the model, text, second text, read position, head, target,
contrast and language a researcher set on Explore survive Learn, Head Finder, Findings and Translate and the
way back, in the page and in the link, in English and in Chinese; a hand-edited link cannot smuggle
anything in; a head is labelled one way."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.ui.focus import Focus, from_params, head_label, to_params
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean, open_view

TEXT = "The keys to the cabinet"
SECOND = "The key to the cabinet"
PAGES = ("app_pages/2_Learn.py", "app_pages/1_Head_Finder.py", "app_pages/4_Findings.py", "app_pages/5_Atlas.py",
         "app_pages/3_Translate.py")


def test_a_link_round_trips_and_ignores_what_does_not_parse():
    focus = Focus(model=SMOLLM, text="a <b>", text_b="c", pos=3, layer=26, head=0, target=" are",
                  contrast=" is", lang="zh")
    params = {k: str(v) for k, v in to_params(focus).items() if v is not None}
    assert params["layer"] == "26" and params["pos"] == "3" and params["lang"] == "zh"
    assert from_params(params) == focus
    hostile = {"layer": "²", "head": "-1", "pos": "1.5", "lang": "fr", "target": "x" * 101, "model": "m" * 301}
    assert from_params(hostile) == Focus()
    # the keys a link held before the focus still work
    assert from_params({"compare": "b", "query": "4"}) == Focus(text_b="b", pos=4)
    assert head_label(26, 0) == "L26 H0"


def _focus(at: AppTest) -> Focus:
    return at.session_state["_focus"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_focus_survives_every_page_and_the_way_back(lang):
    """The researcher's path (issue 35, "Done when"), in AppTest: Explore on SmolLM2, a pair, a position, a
    head, a target; then each other page and back to Explore. Each page shows the same focus, and the link
    carries it on each."""
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["lang"] = lang
    at.run()
    at.text_input(key="text").set_value(TEXT).run()
    open_view(at, "matters").text_input(key="minpair_text").set_value(SECOND).run()
    open_view(at, "writes").selectbox(key="prediction_position").set_value(3).run()
    at.text_input(key="dla_target").set_value(" are").run()
    at.text_input(key="dla_contrast").set_value(" is").run()
    open_view(at, "looks").selectbox(key="head").set_value(5).run()
    at.selectbox(key="layer").set_value(7).run()
    assert_clean(at)
    wanted = Focus(model=SMOLLM, text=TEXT, text_b=SECOND, pos=3, layer=7, head=5, target=" are", contrast=" is",
                   lang=lang)
    assert _focus(at) == wanted
    # every view that reads a position, a head or a target shows the focus's, in every tab
    open_view(at, "writes")
    assert at.selectbox(key="lens_position").value == 3 and at.selectbox(key="dla_position").value == 3
    assert at.text_input(key="lens_target").value == " are"
    assert open_view(at, "matters").text_input(key="patch_target").value == " are"
    expected_link = {k: str(v) for k, v in to_params(wanted).items() if v is not None}
    for page in PAGES:
        at.switch_page(page).run()
        assert_clean(at)
        assert _focus(at) == wanted, page
        assert at.radio(key="lang").value == lang, page
        link = {k: at.query_params[k] for k in expected_link if k in at.query_params}
        assert link == expected_link, (page, link)
        if page != "app_pages/3_Translate.py":  # Translate shows its own encoder-decoder, and says so
            assert at.selectbox(key="model_preset").value == SMOLLM or at.text_input(key="model_custom").value \
                == SMOLLM, page
        if page == "app_pages/2_Learn.py":
            assert at.text_input(key="learn_text").value == TEXT
        if page == "app_pages/1_Head_Finder.py":
            assert at.text_input(key="finder_text").value == TEXT
        at.switch_page("app_pages/0_Explore.py").run()
        assert_clean(at)
        assert _focus(at) == wanted, f"back from {page}"
        # the tab left open is open again, and every tab shows the focus
        assert at.text_input(key="text").value == TEXT and at.text_input(key="minpair_text").value == SECOND
        assert (open_view(at, "looks").selectbox(key="layer").value, at.selectbox(key="head").value) == (7, 5)
        assert open_view(at, "writes").selectbox(key="prediction_position").value == 3
        assert at.text_input(key="dla_target").value == " are"
        open_view(at, "matters")


def test_a_new_text_starts_from_each_views_default_position():
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = TEXT
    at.query_params["pos"] = "2"
    at.query_params["view"] = "writes"
    at.run()
    assert at.selectbox(key="prediction_position").value == 2
    at.text_input(key="text").set_value("Dogs bark").run()
    assert _focus(at).pos is None
    n = len(at.selectbox(key="prediction_position").options)
    assert at.selectbox(key="prediction_position").value == n - 1  # a decoder reads its last token
