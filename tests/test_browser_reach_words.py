"""Chinese at word level in a real browser (issue 19, item 1; streamlit run app.py, Debian's Chromium): a
Chinese sentence on SmolLM2 shows jieba's words, as the token chips' word groups and as the word-level
mosaic's labels, not one word a character."""

from __future__ import annotations

import urllib.parse

import jieba
import pytest
from playwright.sync_api import sync_playwright

from tests.browser import ROOT, launch_chromium, streamlit_server

SCREENSHOT = ROOT / "artifacts" / "chinese_words.png"
SENTENCE = "小明告诉老师他生病了"

# JavaScript: the words of the token chips' groups, in order.
CHIP_WORDS = "() => [...document.querySelectorAll('.attnviz-word')].map(el => el.dataset.word)"
# JavaScript: the layer-0 row labels of the mosaic ("L0 from 0:小明" -> "小明"), in order.
MOSAIC_ROWS = """() => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout && g.layout.meta
        && g.layout.meta.tile && g.data && g.data[0]);
    if (!gd) return [];
    return [...new Set((gd.data[0].y || []).map(String).filter(label => label.startsWith('L0 from ')))]
        .map(label => label.replace(/^L0 from [^:]*:/, ''));
}"""


@pytest.fixture(scope="module")
def page():
    SCREENSHOT.parent.mkdir(exist_ok=True)
    query = urllib.parse.urlencode({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "text": SENTENCE,
                                    "level": "word"})
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        page.goto(f"{url}/?{query}")
        page.wait_for_selector("[data-testid=stApp]")
        page.wait_for_function(f"({MOSAIC_ROWS})().length > 0", timeout=300_000)
        yield page
        browser.close()


def test_chinese_word_level_shows_jieba_words(page, tmp_path):
    jieba.dt.tmp_dir = str(tmp_path)  # jieba.lcut, the reference, caches its dictionary: not in /tmp
    expected = jieba.lcut(SENTENCE)
    assert expected == ["小明", "告诉", "老师", "他", "生病", "了"]
    page.wait_for_function(f"({CHIP_WORDS})().length > 0", timeout=60_000)
    assert page.evaluate(CHIP_WORDS) == expected  # one chip group a word, the word in its tooltip
    assert page.evaluate(MOSAIC_ROWS) == expected  # the word-level mosaic's rows
    group = page.locator(".attnviz-word").first
    assert group.get_attribute("title") == "小明"
    assert page.locator("[data-testid=stException]").count() == 0
    page.screenshot(path=str(SCREENSHOT), full_page=True)
