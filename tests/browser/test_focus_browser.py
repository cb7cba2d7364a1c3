"""The researcher's path in a real browser (issue 35, "Done when"), in English and in Chinese: Explore on
SmolLM2 with a pair, a head picked in the attribution grid, then Learn, back, Translate, back. The sentence,
the pair, the head, the model and the language stay, in the page and in the link, on every page."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import sync_playwright

import attnviz
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.browser import GRID_HAS, ROOT, click_until, launch_chromium, open_tab, streamlit_server

TEXT = "The keys to the cabinet"
SECOND = "The key to the cabinet"
TABS = {"en": {"looks": "Where it looks", "writes": "What it writes", "matters": "Does it matter",
               "patching": "Patch activations", "patch_run": "Patch every head, MLP and position"},
        "zh": {"looks": "看向哪里", "writes": "写入什么", "matters": "是否重要",
               "patching": "在两句之间替", "patch_run": "替换每个头、每个 MLP 和每个位置"}}
CANCEL = {"en": "Cancel", "zh": "取消"}
SCREENSHOT = ROOT / "artifacts" / "focus_{lang}.png"

# JavaScript: viewport coordinates of the cell [layer, head] of the keyed grid (its pick points carry
# (layer, head) in customdata), scrolled into view first.
GRID_CELL = """([key, layer, head]) => {
    const gd = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    if (!gd || !gd._fullData) return null;
    gd.scrollIntoView({block: 'center'});
    const pick = gd._fullData.find(t => t.customdata && t.customdata.length);
    const k = pick.customdata.findIndex(c => c[0] === layer && c[1] === head);
    const xa = gd._fullLayout[pick.xaxis.replace('x', 'xaxis')], ya = gd._fullLayout[pick.yaxis.replace('y', 'yaxis')];
    const box = gd.getBoundingClientRect();
    return [xa.l2p(xa.d2l(pick.x[k])) + xa._offset + box.left, ya.l2p(ya.d2l(pick.y[k])) + ya._offset + box.top];
}"""


# JavaScript: do the head detail's Layer and Head boxes show these values?
HEAD_SHOWN = """([layer, head]) => {
    const shown = key => (document.querySelector(`.st-key-${key} input`) || {}).value;
    return shown('layer') === layer && shown('head') === head;
}"""


def link(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query, keep_blank_values=True).items()}


def go(page, index: int) -> None:
    """Open the index-th page of the sidebar's navigation (Explore, Head Finder, Learn, Translate, Findings)."""
    page.locator("[data-testid=stSidebarNav] a").nth(index).click()
    page.wait_for_load_state()
    page.wait_for_timeout(500)


def wait_for_focus(page, wanted: dict[str, str], timeout: int = 120_000) -> None:
    page.wait_for_function("""wanted => {
        const params = new URLSearchParams(location.search);
        return Object.entries(wanted).every(([k, v]) => params.get(k) === v);
    }""", arg=wanted, timeout=timeout)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_researchers_path_keeps_the_focus_on_every_page(lang):
    require_offline(SMOLLM)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(f"{url}/?model={quote(SMOLLM, safe='')}&lang={lang}&text={quote(TEXT)}&text_b={quote(SECOND)}")
        page.wait_for_function(GRID_HAS, arg="cabinet", timeout=240_000)
        # a head picked in the attribution grid (computed at once for a short text)
        open_tab(page, TABS[lang]["writes"])
        page.wait_for_function(GRID_CELL, arg=["dla_grid", 0, 0], timeout=120_000)
        for _ in range(3):  # a redraw can take the first click
            x, y = page.evaluate(GRID_CELL, ["dla_grid", 7, 5])
            page.mouse.click(x, y)
            try:
                wait_for_focus(page, {"layer": "7", "head": "5"})
                break
            except Exception:
                page.wait_for_timeout(1000)
        wanted = {"model": SMOLLM, "text": TEXT, "text_b": SECOND, "layer": "7", "head": "5"}
        wanted |= {"lang": lang} if lang != "en" else {}  # English is the default: no key
        wait_for_focus(page, wanted)
        # the head detail, the patching table and the focus line follow the clicked head
        page.get_by_text(re.compile(r"(head|头) L7 H5")).first.wait_for(timeout=60_000)
        open_tab(page, TABS[lang]["looks"])
        page.wait_for_function(HEAD_SHOWN, arg=["7", "5"], timeout=60_000)
        for index in (2, 0, 3, 0, 1, 0, 4, 0):  # Learn, back, Translate, back, Head Finder, back, Findings, back
            go(page, index)
            wait_for_focus(page, wanted)
            assert page.locator("[data-testid=stException]").count() == 0, index
            if index == 0:
                page.wait_for_function(GRID_HAS, arg="cabinet", timeout=120_000)
                assert page.locator(".st-key-text input").input_value() == TEXT
                page.wait_for_function(HEAD_SHOWN, arg=["7", "5"], timeout=60_000)  # its tab open again
            if index == 2:
                assert page.locator(".st-key-learn_text input").input_value() == TEXT
        assert link(page).get("lang") == (lang if lang != "en" else None)
        # the pair is the patching's second sentence, and its tab is named in the link
        open_tab(page, TABS[lang]["matters"])
        page.locator(".st-key-minpair_text input").wait_for(timeout=120_000)
        assert page.locator(".st-key-minpair_text input").input_value() == SECOND
        wait_for_focus(page, wanted | {"view": "matters"})
        # patching's one-head table is the focus head's (the pair's default: the prefixes, SmolLM2's " are"/" is")
        page.get_by_text(TABS[lang]["patching"]).first.click()
        one_head = page.get_by_text(re.compile(r"L7 H5 ?[（(]")).first
        run = page.get_by_role("button", name=TABS[lang]["patch_run"])
        run.wait_for(timeout=60_000)
        click_until(page, run, lambda: page.get_by_role("button", name=CANCEL[lang]).or_(one_head).first.wait_for(
            timeout=30_000))
        one_head.wait_for(timeout=300_000)
        assert page.locator("[data-testid=stException]").count() == 0
        page.screenshot(path=str(SCREENSHOT).format(lang=lang), full_page=False)
        browser.close()


def test_a_click_on_a_row_of_the_word_link_ranking_opens_that_head():
    """Issue 35, item 3: a table of heads opens the head clicked, as a grid does (ui/widgets.head_table). The
    ranking's second row is compared with the notebook API's rank_heads on the same words."""
    require_offline(MINILM)
    from attnviz.analysis import rank_heads

    text = "The keys to the cabinet are on the table."
    trace = attnviz.load(MINILM).run(text)
    source, target = trace.words.index("keys"), trace.words.index("are")
    wanted = rank_heads(trace, source, target)[1][:2]
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(f"{url}/?text={quote(text)}")
        page.wait_for_function(GRID_HAS, arg="cabinet", timeout=240_000)
        page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]", timeout=60_000)
        page.get_by_text("Which heads link two words?").click()
        page.wait_for_timeout(1000)  # the expander opening
        for label, word in (("From word", source), ("To word", target)):
            box, option = page.get_by_role("combobox", name=label), f"{word}: {trace.words[word]}"
            for _ in range(3):  # a click during a redraw can leave the list closed
                box.click()
                box.press_sequentially(option)  # the searchable box filters to it
                if page.get_by_role("option", name=option, exact=True).count():
                    break
                box.press("Escape")
                page.wait_for_timeout(1000)
            page.get_by_role("option", name=option, exact=True).click()
            page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]", timeout=60_000)
        table = page.locator(".st-key-explore_ranking [data-testid=stDataFrameResizable]")
        table.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        box = table.bounding_box()
        shown = [str(wanted[0]), str(wanted[1])]
        for _ in range(3):  # the row marker of the second row (a header and a row are 35 px each)
            page.mouse.click(box["x"] + 12, box["y"] + 35 + 35 + 17)
            try:
                page.wait_for_function(HEAD_SHOWN, arg=shown, timeout=15_000)
                break
            except Exception:
                page.wait_for_timeout(1000)
        page.wait_for_function(HEAD_SHOWN, arg=shown, timeout=60_000)  # the head detail shows it
        wait_for_focus(page, {k: v for k, v in zip(("layer", "head"), shown) if v != "0"})  # 0 is no key
        assert page.locator("[data-testid=stException]").count() == 0
        browser.close()
