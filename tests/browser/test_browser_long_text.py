"""A long text in the Explore page, in a real browser (streamlit run app.py, Debian's Chromium): a 900-token
SmolLM2 text is computed with progress per layer and drawn whole (the mosaic pools all its tokens, the chips
show a window); a head pick and the word level each send under 1 MB; Cancel on a 2,000-token text stops its
pass (the server's CPU, from /proc, goes idle) and leaves the button to start it again."""

from __future__ import annotations

import asyncio
import random
import re
import time

import pytest

from tests.conftest import SMOLLM, require_offline
from tests.helpers.browser import ROOT, goes_idle, streamlit_app
from tests.helpers.load_driver import WORDS, Session, launch

PROGRESS = re.compile(r"Layer (\d+) of 30")


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "zebra " + " ".join(rng.choice(WORDS) for _ in range(n)) + "."


@pytest.fixture(scope="module")
def server():
    require_offline(SMOLLM)
    with streamlit_app() as running:
        yield running


async def drive(server) -> dict:
    from playwright.async_api import async_playwright

    out = {}
    async with async_playwright() as p:
        browser = await launch(p)
        session = await Session(browser, 0, viewport=(1400, 2400)).open(
            server.url, {"model": SMOLLM, "text": "The keys to the cabinet are on the table."}, timeout_s=300)
        page = session.page
        seen_progress = []
        page.on("console", lambda message: None)
        step = await session.enter(words(900, 0), server.pid, mode="changed", timeout_s=300)
        out["enter_ok"] = step.ok
        out["meta"] = await page.evaluate("window.__mosaic().layout.meta")
        n = out["meta"]["source_shape"][2]
        await page.get_by_text(f"Tokens ({n})").click()
        out["chips_caption"] = await page.get_by_text(f"Tokens 0–255 of {n}.").count()
        out["chips"] = await page.locator("[data-testid=stMain] span:has(> sub)").count()
        out["pick"] = await session.pick_head(4, server.pid, timeout_s=60)

        async def word_level():
            await page.get_by_text("words", exact=True).first.click()
        out["words"] = await session._act(word_level, "changed", None, server.pid, 60)
        await page.screenshot(path=str(ROOT / "artifacts" / "long_text.png"), full_page=True)
        out["exceptions"] = await session.exceptions()

        box = page.get_by_label("Sentence", exact=True)
        await box.fill(words(2000, 1))  # a pass of ~15 s: Cancel lands well before its end
        await box.press("Enter")
        bar = page.get_by_text(PROGRESS).first
        await bar.wait_for(timeout=60_000)
        seen_progress.append(await bar.inner_text())
        await page.get_by_role("button", name="Cancel").click()
        await page.get_by_text("Cancelled: nothing was kept.").wait_for(timeout=20_000)
        out["cpu_windows"] = goes_idle(server.pid, within=12)
        out["restart_button"] = await page.get_by_role("button", name="Compute the long-text views").count()
        await page.wait_for_timeout(3_000)
        out["progress_after"] = await page.get_by_text(PROGRESS).count()
        out["progress_seen"] = seen_progress
        out["exceptions"] += await session.exceptions()
        await session.close()
        await browser.close()
    return out


@pytest.mark.slow
def test_a_long_text_is_computed_drawn_and_cancelled(server):
    started = time.monotonic()
    out = asyncio.run(drive(server))
    assert out["enter_ok"], out
    meta = out["meta"]
    assert meta["pooled"] and meta["source_shape"][:2] == [30, 9] and meta["source_shape"][2] > 900, meta
    assert out["chips_caption"] == 1 and out["chips"] == 256, out
    assert out["pick"].ok and out["words"].ok, out
    assert out["pick"].bytes_received < 1_000_000 and out["words"].bytes_received < 1_000_000, out
    assert out["progress_seen"] and out["cpu_windows"][-1] < 1.0, out
    assert out["restart_button"] == 1 and out["progress_after"] == 0, out  # not started again by itself
    assert out["exceptions"] == 0, out
    assert time.monotonic() - started < 600
