"""Explore's page length and the server's CPU per page, before and after a change (a benchmark, not a test).

Starts the app twice, side by side in one run: from a git ref (checked out into a temporary worktree) and
from this working tree. Each opens the same link in headless Chromium, waits for the page to settle, and
reports the main column's height in pixels (everything a reader scrolls through on first sight) and the
server's CPU seconds for that first page (from /proc, less noisy than wall time on a 2-core machine).

    .venv/bin/python benchmarks/bench_page_height.py --before a532c00
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import browser as helpers  # noqa: E402

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
TEXT = "The keys to the cabinet are on the table"
NEXT_TEXTS = [f"The keys to the drawer{k} are on the old table" for k in range(3)]
HEIGHT = "() => document.querySelector('[data-testid=stMainBlockContainer]').scrollHeight"


@contextlib.contextmanager
def worktree(ref: str):
    """The tree at `ref`, checked out beside this one for the length of the benchmark."""
    with tempfile.TemporaryDirectory() as parent:
        path = Path(parent) / "tree"
        subprocess.run(["git", "-C", str(helpers.ROOT), "worktree", "add", "--detach", str(path), ref], check=True,
                       capture_output=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(helpers.ROOT), "worktree", "remove", "--force", str(path)], check=False)


def measure(browser, app_dir: Path) -> dict:
    link = f"/?model={urllib.parse.quote(MODEL, safe='')}&text={urllib.parse.quote(TEXT)}"
    with helpers.streamlit_app(app_dir, timeout=180) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        cpu = helpers.server_cpu_seconds(server.pid)
        page.goto(server.url + link)
        page.wait_for_function(helpers.GRID_HAS, arg="cabinet", timeout=300_000)
        helpers.goes_idle(server.pid, within=300)  # the rest of the page (readouts computed at once) has drawn
        page.wait_for_timeout(2000)
        height = page.evaluate(HEIGHT)
        cpu = helpers.server_cpu_seconds(server.pid) - cpu
        # Streamlit scrolls inside its own container: a viewport as tall as the column shows all of it.
        page.set_viewport_size({"width": 1400, "height": min(height + 200, 16_000)})
        page.wait_for_timeout(3000)
        page.screenshot(path=str(helpers.ROOT / "artifacts" / f"page_height_{app_dir.name}.png"))
        # A new sentence on the loaded model: what each Enter costs the server from then on.
        enters = []
        for k, sentence in enumerate(NEXT_TEXTS):
            before = helpers.server_cpu_seconds(server.pid)
            box = page.get_by_label("Sentence", exact=True)
            box.fill(sentence)
            box.press("Enter")
            page.wait_for_function(helpers.GRID_HAS, arg=f"drawer{k}", timeout=300_000)
            helpers.goes_idle(server.pid, within=300)
            enters.append(helpers.server_cpu_seconds(server.pid) - before)  # to idle
        page.close()
    return {"height_px": height, "server_cpu_s": round(cpu, 1), "enter_cpu_s": round(sum(enters) / len(enters), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="a532c00", help="git ref of the 'before' tree")
    args = parser.parse_args()
    with sync_playwright() as playwright, worktree(args.before) as before:
        browser = helpers.launch_chromium(playwright)
        started = time.perf_counter()
        rows = {f"before ({args.before})": measure(browser, before),
                "after (working tree)": measure(browser, helpers.ROOT)}
        browser.close()
    print(f"Explore, {MODEL}, '{TEXT}', 1400 px wide, first page (no expander opened):")
    for name, row in rows.items():
        print(f"  {name:24} main column {row['height_px']:6d} px   server CPU: first page {row['server_cpu_s']:5.1f} s"
              f" (model load included), then {row['enter_cpu_s']:5.2f} s per new sentence (mean of 3)")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
