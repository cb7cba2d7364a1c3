"""Chinese at word level in a real browser (issue 19, item 1; streamlit run app.py, Debian's Chromium): a
Chinese sentence on SmolLM2 shows jieba's words, as the token chips' word groups and as the word-level
mosaic's labels, not one word a character. And (item 2) an uploaded treebank is read from its own text:
no separator option, and the count caption says how many arcs were skipped and texts disagreed."""

from __future__ import annotations

import urllib.parse

import jieba
import pytest
from playwright.sync_api import sync_playwright

from tests.helpers.browser import ROOT, launch_chromium, streamlit_server

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


TREEBANK = "".join(
    f"# sent_id = s{k}\n# text = {text}\n"
    "1\tI\t_\t_\t_\t_\t3\tnsubj\t_\t_\n2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\t_\t_\t_\t_\t4\taux\t_\t_\n3\tn't\t_\t_\t_\t_\t2\tadvmod\t_\t_\n"
    "4\tknow\t_\t_\t_\t_\t0\troot\t_\tSpaceAfter=No\n5\t.\t_\t_\t_\t_\t4\tpunct\t_\t_\n\n"
    for k, text in enumerate(["I don't know.", "I do not know.", "I don't  know ."]))


def test_a_treebank_upload_is_read_from_its_own_text(page, tmp_path):
    path = tmp_path / "dont.conllu"
    path.write_text(TREEBANK, encoding="utf-8")
    page.goto(page.url.split("?")[0].rstrip("/") + "/Head_Finder")
    page.get_by_text("Upload a file", exact=True).first.click()
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(str(path))
    page.get_by_text("Detected format: CoNLL-U").wait_for(timeout=60_000)
    page.get_by_text("A treebank is read from its own text", exact=False).first.wait_for(timeout=30_000)
    caption = page.get_by_text("items of relation", exact=False).first
    caption.wait_for(timeout=30_000)
    assert "3 arcs between two words of one multi-word token skipped" in caption.inner_text()
    assert "in 1 sentences # text disagreed" in caption.inner_text()
    assert page.get_by_text("Script without spaces", exact=False).count() == 0
    assert page.locator("[data-testid=stException]").count() == 0
