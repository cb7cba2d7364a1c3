"""The Atlas page in Chromium (issue 37, items 5 and 7): a server with an empty atlas folder opens the page on
MiniLM, the build button builds the atlas over the shipped probe sets (progress, then the head finder), a click on
a point opens that head's dashboard, and "Open in Explore" opens Explore on that head. A screenshot of the
dashboard goes to $TMPDIR (never into the repository)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import sync_playwright

from tests.conftest import MINILM, require_offline
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


def test_build_the_atlas_click_a_head_and_open_it_in_explore(tmp_path):
    require_offline(MINILM)
    shot = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()) / "attnviz-atlas.png"
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
        page.wait_for_timeout(1500)  # the figures' last drawing
        assert page.locator("[data-testid=stException]").count() == 0
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 50_000

        page.get_by_role("button", name="Open L3 H5 in Explore").click()
        # Explore is the default page: its address is the root
        page.wait_for_url(lambda url: urlsplit(url).path in ("/", "/explore") and {"layer=3", "head=5"} <= set(
            urlsplit(url).query.split("&")), timeout=120_000)
        page.get_by_label("Sentence", exact=True).wait_for(timeout=120_000)
        assert page.locator("[data-testid=stException]").count() == 0
        browser.close()
