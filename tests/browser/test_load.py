"""Many visitors at once: 4 browser sessions x 3 reruns against one `streamlit run app.py` on the default model.

Every session types new sentences with its own marker words ("zebra{session}x{i}"); each must see only its
own markers (mosaic and token chips), no exception box, and every rerun must finish within the stall limit.
The numbers (p50/p95, throughput, server CPU per rerun, RSS) are printed and written to artifacts/load.json.
The driver is shared with benchmarks/bench_server.py (tests/helpers/load_driver.py).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from playwright.async_api import async_playwright

from tests.conftest import MINILM, require_offline
from tests.helpers.browser import ROOT, rss_bytes, streamlit_app
from tests.helpers.load_driver import concurrent_load, launch

SESSIONS, RERUNS, STALL_S = 4, 3, 45.0  # 3 reruns, not 5: 45 s less of a 15-minute suite
REPORT = ROOT / "artifacts" / "load.json"


async def _load(server) -> dict:
    async with async_playwright() as p:
        browser = await launch(p)
        try:
            return await concurrent_load(browser, server.url, server.pid, SESSIONS, RERUNS, stall_s=STALL_S,
                                         open_timeout_s=120, log=print)
        finally:
            await browser.close()


@pytest.mark.slow
def test_concurrent_sessions_see_only_their_own_text():
    require_offline(MINILM)
    started = time.perf_counter()
    with streamlit_app() as server:
        print(f"\nserver healthy after {time.perf_counter() - started:.1f} s")
        rss_start = rss_bytes(server.pid)
        result = asyncio.run(_load(server))
    result["rss_start_bytes"] = rss_start
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(result, indent=1))
    print(f"\nload {SESSIONS}x{RERUNS}: {result['completed']}/{result['attempted']} reruns in "
          f"{result['elapsed_s']:.1f} s = {result['throughput_per_s']:.2f}/s; Enter -> idle p50 "
          f"{result['p50_s']:.2f} s p95 {result['p95_s']:.2f} s; server CPU per rerun "
          f"{result['server_cpu_per_rerun_s']:.2f} s; RSS {rss_start / 2**20:.0f} MiB at start, "
          f"{result['rss_before_bytes'] / 2**20:.0f} -> {result['rss_after_bytes'] / 2**20:.0f} MiB under load; "
          f"{result['lost_enters']} Enter(s) dropped by the page and pressed again, "
          f"{len(result['unregistered'])} never registered ({REPORT})")
    assert result["leaks"] == 0, f"sessions saw other sessions' markers: {result['leak_examples']}"
    assert result["exception_boxes"] == 0 and result["reruns_with_exception_box"] == 0
    assert result["stalls"] == 0, f"reruns not idle within {STALL_S} s: {result['stalled']}"
    # Open problem (issue 8's note): now and then the page drops an Enter, twice in a row, and no run
    # starts. It is counted and reported here; more than two in a run fails the test (a bare-clone run had
    # two, both a session's first Enter: 10 of 12 reruns; isolation was checked on all 10).
    assert len(result["unregistered"]) <= 2, f"Enters that never started a run: {result['unregistered']}"
    assert result["completed"] >= SESSIONS * RERUNS - len(result["unregistered"])
