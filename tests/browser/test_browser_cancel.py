"""Cancel that cancels, in a real browser (streamlit run app.py, Debian's Chromium): the importance scan of
SmolLM2 (270 forward passes) stops within a step of Cancel, and again when its tab closes; the server's CPU
(from /proc) then goes idle instead of running the scan to its end."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.conftest import SMOLLM, require_offline
from tests.helpers.browser import ROOT, goes_idle, idle_cpu, launch_chromium, open_tab, streamlit_app

# About 42 tokens, under the scan's 64: each of the 270 passes is then slow enough (a 10-token sentence is
# scanned in about 8 s) that Cancel lands mid-scan after the test has measured the busy server.
TEXT = ("The keys to the old wooden cabinet in the hall are on the kitchen table, next to the letters that "
        "arrived this morning, and the dog that sleeps under the window has not moved since the rain began.")
LINK = f"?model={quote(SMOLLM)}&text={quote(TEXT)}&off=0.0"
PROGRESS = re.compile(r"Heads switched off: (\d+) of 270")


@pytest.fixture(scope="module")
def server():
    require_offline(SMOLLM)
    with streamlit_app() as running:
        yield running


def start_scan(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    page.goto(url + LINK)
    page.wait_for_selector("[data-testid=stApp]")
    open_tab(page, "Does it matter")  # SmolLM2 loads first
    page.get_by_text("Switch heads off").click()
    scan = page.get_by_role("button", name="Scan every head (270 forward passes)")
    # the job's own words only: "Heads switched off" alone is also the heading of the ablation's second table
    started = page.get_by_text(re.compile(r"Starting…|Waiting for the server|Heads switched off: \d+ of 270"))
    for _ in range(3):  # a click while the page is still running its last rerun can be dropped: click again
        scan.click(timeout=180_000)
        try:
            expect(started.first).to_be_visible(timeout=30_000)
            break
        except AssertionError:
            continue
    bar = page.get_by_text(PROGRESS)
    expect(bar).to_be_visible(timeout=240_000)
    return page, bar


def passes_done(bar) -> int:
    return int(PROGRESS.search(bar.first.inner_text()).group(1))


@pytest.mark.slow
def test_cancel_stops_the_scan_and_closing_the_tab_stops_it_too(server):
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page, bar = start_scan(browser, server.url)
        page.screenshot(path=str(ROOT / "artifacts" / "cancel.png"), full_page=True)
        done_before = passes_done(bar)
        busy = idle_cpu(server.pid, 3.0)
        # The scan runs: its count moves and the server works. How hard depends on what else runs on these 2
        # cores (0.74 CPU-s in 2 s seen in CI beside the other xdist worker, 2 s and more alone; a pass can take
        # more than 3 s on a loaded machine), so the idle check below is relative to what was measured here.
        page.wait_for_function("""([pattern, before]) => {
            const found = document.body.innerText.match(new RegExp(pattern));
            return found && Number(found[1]) > before; }""", arg=[PROGRESS.pattern, done_before], timeout=120_000)
        assert busy > 0.6, busy
        page.get_by_role("button", name="Cancel").click()
        expect(page.get_by_text("Cancelled: nothing was kept.")).to_be_visible(timeout=20_000)
        windows = goes_idle(server.pid, within=12)
        assert windows[-1] < min(1.0, busy / 2), (busy, windows)
        assert page.locator("[data-testid=stException]").count() == 0

        page.close()  # the same scan again, then the tab goes away mid-scan
        page, bar = start_scan(browser, server.url)
        page.close()
        windows = goes_idle(server.pid, within=40)  # the heartbeat (15 s) runs out, the next step stops the work
        assert windows[-1] < 1.0 and len(windows) <= 10, windows
        browser.close()
