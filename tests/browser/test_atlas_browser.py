"""The Atlas page in Chromium (issue 37, items 5 and 7): a server with an empty atlas folder opens the page on
MiniLM, the build button builds the atlas over the shipped probe sets (progress, then the head finder), a click on
a point opens that head's dashboard: its examples drawn as shaded tokens, its two histograms and its top tokens,
with no exception box; ours imported as the model's published atlas appears beside it (a scatter per metric, the
published examples); and "Open in Explore" opens Explore on that head. Screenshots of the dashboard and of its
examples go to artifacts/ (ignored by git)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import sync_playwright

from attnviz.readouts import atlas_headvis
from tests.conftest import MINILM, ROOT, require_offline
from tests.helpers.browser import launch_chromium, streamlit_app

pytestmark = pytest.mark.slow

# JavaScript: page coordinates of the head finder's point for [layer, head] (plots.head_scatter: customdata).
POINT_CENTRE = """([layer, head]) => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(
        g => g.layout.meta && g.layout.meta.points !== undefined);
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    for (const trace of gd._fullData) {
        const k = (trace.customdata || []).findIndex(c => c[0] === layer && c[1] === head);
        if (k >= 0) return [xa.l2p(xa.d2l(trace.x[k])) + xa._offset + box.left,
                            ya.l2p(ya.d2l(trace.y[k])) + ya._offset + box.top];
    }
    return null;
}"""
HAS_SCATTER = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
    g => g.layout && g.layout.meta && g.layout.meta.points === 72)"""
# JavaScript: how many of the dashboard's histograms (plots.atlas_head: layout.meta.bins) are drawn with bars.
HISTOGRAMS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(
    g => g.layout && g.layout.meta && g.layout.meta.bins !== undefined && g.querySelector('.bars path')).length"""
# JavaScript: the examples' shaded tokens (ui/atlas_examples.py), as the browser laid them out.
EXAMPLES = """() => {
    const blocks = [...document.querySelectorAll('.avx-ex')];
    const tokens = blocks.flatMap(b => [...b.querySelectorAll('span.tk')]);
    return {blocks: blocks.length, tokens: tokens.length,
            shaded: tokens.filter(t => getComputedStyle(t).backgroundColor !== 'rgba(0, 0, 0, 0)').length,
            titled: tokens.filter(t => t.title).length, links: blocks.flatMap(b => [...b.querySelectorAll('a')]).length,
            height: blocks.length ? blocks[0].getBoundingClientRect().height : 0};
}"""
# JavaScript: the published atlas's scatter per metric (plots.metric_agreement: layout.meta.metrics), six of them.
COMPARED = """() => [...document.querySelectorAll('.js-plotly-plot')].some(
    g => g.layout && g.layout.meta && g.layout.meta.metrics && g.layout.meta.metrics.length === 6)"""
ARTIFACTS = ROOT / "artifacts"


def test_build_the_atlas_click_a_head_and_open_it_in_explore(tmp_path):
    require_offline(MINILM)
    ARTIFACTS.mkdir(exist_ok=True)
    shot, examples_shot = ARTIFACTS / "atlas.png", ARTIFACTS / "atlas_examples.png"
    published_shot = ARTIFACTS / "atlas_published.png"
    with streamlit_app(env={"ATTNVIZ_ATLAS_DIR": str(tmp_path)}) as server, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 2600})
        page.goto(f"{server.url}/Atlas")
        build = page.get_by_role("button", name="Build the atlas for this model")
        build.wait_for(timeout=180_000)
        build.click()
        page.wait_for_function(HAS_SCATTER, timeout=600_000)
        assert list(tmp_path.glob("*/atlas.duckdb"))

        centre = page.evaluate(POINT_CENTRE, [3, 5])
        assert centre is not None
        heading = page.get_by_role("heading", name="Head L3 H5")
        for _ in range(3):  # a click during a redraw can be lost
            page.mouse.click(*centre)
            try:
                heading.wait_for(timeout=30_000)
                break
            except Exception:
                centre = page.evaluate(POINT_CENTRE, [3, 5])
        heading.wait_for(timeout=5_000)
        page.get_by_text("The four heads of the tutorial, for this model").wait_for(timeout=30_000)
        page.get_by_text("Examples of L3 H5").wait_for(timeout=30_000)
        page.wait_for_function(f"({HISTOGRAMS})() >= 2", timeout=30_000)
        page.wait_for_timeout(1500)  # the figures' last drawing
        assert page.locator("[data-testid=stException]").count() == 0
        drawn = page.evaluate(EXAMPLES)
        assert drawn["blocks"] == 4 and drawn["tokens"] >= 4 * 5, drawn  # the first four of 22 examples
        assert drawn["shaded"] > 0 and drawn["titled"] == drawn["tokens"] and drawn["links"] == 0, drawn
        assert 20 < drawn["height"] < 200, drawn  # one example: a label and a line or two of tokens
        page.get_by_text("Top key tokens").wait_for(timeout=5_000)
        page.get_by_text("Published atlas beside ours").wait_for(timeout=5_000)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 50_000
        examples = page.get_by_text("Examples of L3 H5")
        examples.evaluate("e => e.scrollIntoView({block: 'start'})")  # the app scrolls in its own container
        page.wait_for_timeout(500)
        box = examples.bounding_box()
        page.screenshot(path=str(examples_shot), clip={"x": 0, "y": max(0, box["y"] - 20), "width": 1400,
                                                       "height": 1300})

        # ours exported and imported as this model's published atlas (`atlas import --for-model`): after a rerun
        # (Streamlit's "r"), the comparison's scatter per metric and the published examples are drawn
        ours = next(tmp_path.glob("*/atlas.duckdb")).parent
        atlas_headvis.export(ours, tmp_path / "tree")
        atlas_headvis.import_into_place(tmp_path / "tree", ours.with_name(ours.name + ".published"))
        page.get_by_role("heading", name="Published atlas beside ours").click()
        page.keyboard.press("r")
        page.wait_for_function(COMPARED, timeout=60_000)
        page.get_by_text("Published examples and histograms of L3 H5").click()
        page.wait_for_function(f"({EXAMPLES})().blocks >= 8", timeout=30_000)
        page.wait_for_timeout(1500)
        assert page.locator("[data-testid=stException]").count() == 0
        compared = page.get_by_role("heading", name="Published atlas beside ours")
        compared.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        box = compared.bounding_box()
        page.screenshot(path=str(published_shot), clip={"x": 0, "y": max(0, box["y"] - 20), "width": 1400,
                                                        "height": 1500})

        page.get_by_role("button", name="Open L3 H5 in Explore").click()
        # Explore is the default page: its address is the root
        page.wait_for_url(lambda url: urlsplit(url).path in ("/", "/explore") and {"layer=3", "head=5"} <= set(
            urlsplit(url).query.split("&")), timeout=120_000)
        page.get_by_label("Sentence", exact=True).wait_for(timeout=120_000)
        assert page.locator("[data-testid=stException]").count() == 0
        browser.close()
