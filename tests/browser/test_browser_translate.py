"""The Translate page in a real browser (streamlit run app.py, Debian's Chromium): the offline untrained
model opens labelled, a typed target text becomes the decoder's input, and cross-attention is drawn as an
alignment between the source and the target words."""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from tests.helpers.browser import ROOT, launch_chromium, streamlit_server

SCREENSHOT = ROOT / "artifacts" / "translate.png"
TARGET = "抽屉里的钥匙不见了。"

# JavaScript: the number of drawn plotly charts, and whether one of them has `word` among its y tick labels.
CHARTS = "() => [...document.querySelectorAll('.js-plotly-plot')].filter(gd => gd.data && gd.data.length).length"
Y_HAS = """word => [...document.querySelectorAll('.js-plotly-plot')].some(gd =>
    gd.layout && gd.layout.yaxis && (gd.layout.yaxis.ticktext || []).map(String).includes(word))"""


@pytest.fixture(scope="module")
def page():
    SCREENSHOT.parent.mkdir(exist_ok=True)
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 2600})
        page.goto(url.rstrip("/") + "/Translate")
        page.wait_for_selector("[data-testid=stApp]")
        page.wait_for_function(f"{CHARTS} >= 3", timeout=180_000)  # mosaic, head view, alignment
        yield page
        browser.close()


def test_translation_view_with_a_target_text(page):
    assert page.get_by_text("untrained", exact=False).count() > 0
    # The first visit of this fresh server was a link to /Translate: the page still runs inside app.py's
    # navigation (a folder named pages/ made Streamlit run the page file alone, under a legacy sidebar).
    nav = page.locator("[data-testid=stSidebarNav]").inner_text().split("\n")
    assert "Explore" in nav and "app" not in nav
    target = page.get_by_label("Target text", exact=True)
    target.fill(TARGET)
    target.press("Enter")
    page.wait_for_url("**target=**", timeout=60_000)
    page.wait_for_function(Y_HAS, arg="钥匙", timeout=60_000)  # the alignment's target words (jieba: 钥匙)
    page.wait_for_timeout(1500)
    assert page.locator("[data-testid=stException]").count() == 0
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 50_000
