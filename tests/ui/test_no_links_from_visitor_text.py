"""Visitor text never becomes a link (issue 36, item 5): every page, with every text a link may carry set to bare
addresses (www., https://, an e-mail), and Explore's every tab. Streamlit's Markdown (markdown, captions, alerts,
expander and tab labels) turns GitHub's autolink literals into links after its escapes are read; `ui/escape.md`
breaks each with a zero width space. This walks every Markdown body the pages rendered and finds none whose
address could still start a link. Uploads' content reaches the page through the same `md`
(tests/ui/test_app_uploads.py); the browser test (tests/browser/test_e2e_browser.py) counts the <a> elements."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.helpers.pages import APP, FINDER, LEARN, TIMEOUT, TRANSLATE, open_view

FINDINGS = str(ROOT / "app_pages" / "4_Findings.py")
ADDRESSES = "www.evil.example/a https://evil.example/b HTTP://evil.example/c me@evil.example"
# Every key of ui/url_state.QUERY_KEYS that holds free text.
TEXT_KEYS = {"model": "www.evil.example/login", "text": ADDRESSES + " zebra", "text_b": ADDRESSES,
             "cont": ADDRESSES, "compare": ADDRESSES, "target": "www.evil.example", "contrast": "https://e.example",
             "tmodel": "www.evil.example/t", "src": ADDRESSES, "ttarget": ADDRESSES, "tprefix": "www.evil.example"}
# An address GitHub's Markdown would link: www. (its dot escaped or not), a scheme's ://, an e-mail's @domain; each
# with no zero width space where `md` puts one.
LINKABLE = re.compile(r"(?i)www\\?\.|https?\\?:\\?/|@[a-z0-9]")
MARKDOWN_ELEMENTS = ("markdown", "caption", "error", "warning", "info", "success", "expander", "tab", "title",
                     "header", "subheader")


def bodies(at: AppTest) -> list[str]:
    found = []
    for kind in MARKDOWN_ELEMENTS:
        for element in at.get(kind):
            for field in ("body", "label"):
                value = getattr(element.proto, field, None)
                if isinstance(value, str) and value:
                    found.append(value)
    return found


def linkable(at: AppTest) -> list[str]:
    return [body for body in bodies(at) if LINKABLE.search(body)]


def opened(page: str) -> AppTest:
    at = AppTest.from_file(page, default_timeout=TIMEOUT)
    for key, value in TEXT_KEYS.items():
        at.query_params[key] = value
    return at.run()


@pytest.mark.parametrize("page", [FINDER, LEARN, TRANSLATE, FINDINGS], ids=["finder", "learn", "translate", "findings"])
def test_no_page_makes_a_link_of_visitor_text(page):
    at = opened(page)
    assert not at.exception, [e.value for e in at.exception]
    assert any("evil" in body for body in bodies(at)) or page == FINDINGS, "the addresses should be shown somewhere"
    assert linkable(at) == []


def test_no_view_of_explore_makes_a_link_of_visitor_text():
    at = opened(APP)
    assert not at.exception, [e.value for e in at.exception]
    assert any("www\u200b" in body for body in bodies(at)), "the refused model should be named, as text"
    for view in ("looks", "writes", "matters", "which", "check"):
        open_view(at, view)
        assert not at.exception, (view, [e.value for e in at.exception])
        assert linkable(at) == [], view
