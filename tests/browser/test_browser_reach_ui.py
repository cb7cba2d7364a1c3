"""Issue 19 (reach-ui) in a real browser (streamlit run app.py, Debian's Chromium): a `?lang=zh` link opens in
Chinese with Chinese placeholders, a decoder's first token is set aside from the page, and a click on a
layers x heads grid (the detectors, Translate's mosaic) opens that head with the URL updated."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.browser import GRID_HAS, IDLE, ROOT, click_until, launch_chromium, open_tab, streamlit_server

ARTIFACTS = ROOT / "artifacts"
TEXT = "The keys to the cabinet are on the table."

# JavaScript: page coordinates of the pick point for [layer, head] in the plotly chart whose title includes
# `title` (score grids), or in the mosaic (layout.meta.tile) when `title` is empty.
PICK_POINT = """([title, layer, head]) => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => title
        ? (g.layout?.title?.text || '').includes(title) : (g.layout?.meta && g.layout.meta.tile));
    const pick = gd._fullData[1], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const k = pick.customdata.findIndex(c => c[0] === layer && c[1] === head);
    const box = gd.getBoundingClientRect();
    return [xa.l2p(xa.d2l(pick.x[k])) + xa._offset + box.left, ya.l2p(ya.d2l(pick.y[k])) + ya._offset + box.top];
}"""
# JavaScript: what the select widgets show when nothing is chosen (their text, or their input's placeholder).
PLACEHOLDERS = """() => [...document.querySelectorAll('[data-testid=stSelectbox], [data-testid=stMultiSelect]')]
    .flatMap(e => [...e.querySelectorAll('input')].map(i => i.placeholder)
        .concat([...e.querySelectorAll('[data-baseweb=select] div')]
            .map(d => d.childElementCount ? '' : d.textContent)))
    .filter(Boolean)"""
# JavaScript: the y tick labels of the head heatmap (the plotly chart with a "from (query)" axis).
HEAD_ROWS = """() => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
        g => (g.layout?.yaxis?.title?.text || '').includes('query') && !(g.layout?.meta && g.layout.meta.tile));
    return gd ? gd.data[0].y.length : -1;
}"""


BASE: dict[str, str] = {}  # the server's URL, set by the fixture


def query(page) -> dict:
    return {key: values[0] for key, values in parse_qs(urlparse(page.url).query).items()}


def wait_query(page, timeout: float = 60_000, **expected) -> None:
    page.wait_for_function(
        """expected => { const q = new URLSearchParams(location.search);
                         return Object.entries(expected).every(([k, v]) => q.get(k) === v); }""",
        arg=expected, timeout=timeout)


def click_head(page, title: str, layer: int, head: int, /, **expected) -> None:
    """Click the grid titled `title` at (layer, head) until the link holds `expected`: the point is measured,
    then clicked, and a grid redrawn in between (a rerun finishing, on a loaded machine) takes the click on
    nothing. Three clicks, each given 20 s; the last one's wait is the test's."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        x, y = page.evaluate(PICK_POINT, [title, layer, head])
        page.mouse.click(x, y)
        try:
            wait_query(page, timeout=20_000, **expected)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            page.wait_for_selector(IDLE, timeout=60_000)


@pytest.fixture(scope="module")
def page():
    require_offline(MINILM)
    ARTIFACTS.mkdir(exist_ok=True)
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        # Tall enough for the whole page: Streamlit scrolls inside its own container, not the window.
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        BASE["url"] = url
        yield page
        browser.close()


@pytest.mark.slow
def test_a_chinese_link_opens_in_chinese_with_chinese_placeholders(page):
    page.goto(f"{BASE['url']}/?lang=zh&text={quote('小明告诉老师他生病了。')}")
    page.get_by_label("句子", exact=True).wait_for(timeout=120_000)
    nav = page.locator("[data-testid=stSidebarNav]").inner_text()
    assert all(name in nav for name in ("探索", "注意力头查找器", "学习", "翻译")) and "Explore" not in nav
    expect(page.get_by_role("radio", name="中文", exact=True)).to_be_checked()
    open_tab(page, "是否重要")  # Explore's views by question (ui/explore.py)
    page.get_by_text("关闭注意力头").first.click()  # the ablation expander: its multiselects' placeholders
    page.get_by_text("要关闭的注意力头").first.wait_for(timeout=30_000)
    page.wait_for_function(f"() => ({PLACEHOLDERS})().filter(p => p === '请选择（可多选）').length === 2",
                           timeout=30_000)
    assert not [p for p in page.evaluate(PLACEHOLDERS) if "Choose" in p]
    assert query(page)["lang"] == "zh"
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator("[data-testid=stException]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "reach_ui_lang_zh.png"), full_page=True)
    page.get_by_text("English", exact=True).click()
    page.get_by_label("Sentence", exact=True).wait_for(timeout=60_000)
    page.wait_for_function("() => !new URLSearchParams(location.search).has('lang')", timeout=30_000)


@pytest.mark.slow
def test_a_decoder_sets_its_first_token_aside(page):
    require_offline(SMOLLM)
    page.goto(f"{BASE['url']}/?model={quote(SMOLLM)}&text={quote(TEXT)}&layer=5&head=2")
    page.wait_for_function(GRID_HAS, arg="cabinet", timeout=300_000)
    page.wait_for_selector(IDLE, timeout=120_000)
    expect(page.get_by_text("First-token share on this sentence:").first).to_be_visible(timeout=30_000)
    rows = page.evaluate(HEAD_ROWS)
    assert rows > 5
    page.get_by_text("Set the first token aside", exact=True).click()
    wait_query(page, first_aside="1")
    page.wait_for_function(f"() => ({HEAD_ROWS})() === {rows - 1}", timeout=120_000)
    expect(page.get_by_text("The first token is set aside").first).to_be_visible(timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator("[data-testid=stException]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "reach_ui_first_aside.png"), full_page=True)
    # the link keeps the option: a fresh load of it opens with the first token set aside
    page.goto(page.url)
    page.wait_for_function(GRID_HAS, arg="cabinet", timeout=120_000)
    page.wait_for_function(f"() => ({HEAD_ROWS})() === {rows - 1}", timeout=120_000)


def test_a_click_on_a_detector_grid_opens_that_head(page):
    page.goto(f"{BASE['url']}/?text={quote('Dogs bark at night.')}")
    page.wait_for_function(GRID_HAS, arg="bark", timeout=120_000)
    open_tab(page, "Which heads")  # Explore's views by question (ui/explore.py)
    page.get_by_text("Head detectors: previous-token").click()
    drawn = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
        gd => (gd.layout?.title?.text || '').includes('induction'))"""
    click_until(page, page.get_by_role("button", name="Find these heads"),
                lambda: page.wait_for_function(drawn, timeout=60_000))
    page.wait_for_function(drawn, timeout=300_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    click_head(page, "previous-token", 4, 7, layer="4", head="7")
    open_tab(page, "Where it looks")  # the head detail follows the clicked head
    head = page.locator("[data-testid=stSelectbox]").filter(has_text="Head").first
    expect(head.locator("input")).to_have_value("7", timeout=30_000)
    assert page.locator("[data-testid=stException]").count() == 0


def test_a_click_on_the_translate_mosaic_opens_that_head(page):
    page.goto(f"{BASE['url']}/Translate")
    page.wait_for_function("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .some(g => g.layout?.meta && g.layout.meta.tile)""", timeout=300_000)
    page.wait_for_selector(IDLE, timeout=120_000)
    click_head(page, "", 3, 5, tlayer="3", thead="5")
    assert page.locator("[data-testid=stException]").count() == 0
