"""A long text in the Explore page, in headless Chromium (a benchmark, not a test): issue 20's app targets.

One `streamlit run app.py` (this python, headless, ATTNVIZ_MEMORY_BUDGET_GB=2.5 as the public host), one
browser page on SmolLM2-135M-Instruct. A text of about --tokens tokens (random English words, one token each)
is typed into Sentence and Enter pressed: the time and server CPU seconds (utime + stime of the server process,
from /proc, all its threads) until the mosaic is drawn, and the websocket bytes the page received; then head
picks, the word level and the first token set aside, each a rerun measured the same way; the server's RSS
(VmRSS) before and after, and its peak (VmHWM). What the app holds for the text is ReducedTrace.nbytes of the
same text, computed in this process afterwards (the object the server keeps).

    .venv/bin/python benchmarks/bench_long_explore.py [--tokens 4096] [--picks 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import rss_bytes, streamlit_app  # noqa: E402
from tests.load_driver import WORDS, Session, launch  # noqa: E402

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
WARM_TEXT = "The keys to the cabinet are on the table."


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def long_text(tokens: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "zebra " + " ".join(rng.choice(WORDS) for _ in range(tokens + 40)) + "."  # truncated at the limit


async def toggle(session: Session, label: str, pid: int, timeout_s: float):
    """Click a toggle or radio option by its label; wait for the rerun to end with a new mosaic."""
    async def click():
        await session.page.get_by_text(label, exact=True).first.click()
    return await session._act(click, "changed", None, pid, timeout_s)


async def run(args) -> dict:
    out: dict = {"tokens_asked": args.tokens}
    env = {**os.environ, "ATTNVIZ_MEMORY_BUDGET_GB": str(args.budget_gb)}
    with streamlit_app(ROOT, env=env, timeout=300) as server:
        pid = server.pid
        out["rss_start"] = rss_bytes(pid)
        async with async_playwright() as p:
            browser = await launch(p)
            session = await Session(browser, 0).open(server.url, {"model": SMOLLM, "text": WARM_TEXT}, timeout_s=600)
            out["rss_with_model"] = rss_bytes(pid)
            text = long_text(args.tokens)
            step = await session.enter(text, pid, mode="changed", timeout_s=args.timeout_s)
            out["enter"] = step.__dict__
            out["rss_after_text"] = rss_bytes(pid)
            meta = await session.page.evaluate("window.__mosaic().layout.meta")
            out["tokens_drawn"] = meta["source_shape"][2]
            out["picks"] = []
            for i in range(args.picks):
                pick = await session.pick_head(1 + i % 8, pid, timeout_s=args.timeout_s)
                out["picks"].append(pick.__dict__)
            out["word_level"] = (await toggle(session, "words", pid, args.timeout_s)).__dict__
            out["first_aside"] = (await toggle(session, "Set the first token aside", pid, args.timeout_s)).__dict__
            await session.page.screenshot(path=str(args.screenshot), full_page=True)
            out["exceptions"] = await session.exceptions()
            out["rss_end"], out["rss_peak"] = rss_bytes(pid), peak_rss(pid)
            await session.close()
            await browser.close()
    import attnviz  # the same text, to count what the server holds for it

    model = attnviz.load(SMOLLM, max_tokens=args.tokens)
    from attnviz.plots.pooling import tile_cells

    held = model.run_reduced(text, tile=tile_cells(model.info.n_layers, model.info.n_heads))
    out["held_bytes"] = held.nbytes
    return out


def table(out: dict) -> str:
    mb = lambda n: f"{n / 1e6:,.0f} MB"  # noqa: E731
    rows = [
        ("tokens drawn", f"{out['tokens_drawn']:,}"),
        ("Enter → mosaic drawn", f"{out['enter']['wall_s']:.1f} s wall, {out['enter']['server_cpu_s']:.1f} s server CPU, "
                                  f"{out['enter']['bytes_received'] / 1e6:.2f} MB received"),
        *((f"head pick {k + 1}", f"{p['wall_s']:.2f} s wall, {p['server_cpu_s']:.2f} s server CPU, "
                                 f"{p['bytes_received'] / 1e6:.3f} MB") for k, p in enumerate(out["picks"])),
        ("word level", f"{out['word_level']['wall_s']:.2f} s wall, {out['word_level']['server_cpu_s']:.2f} s CPU, "
                       f"{out['word_level']['bytes_received'] / 1e6:.3f} MB"),
        ("first token aside", f"{out['first_aside']['wall_s']:.2f} s wall, "
                              f"{out['first_aside']['server_cpu_s']:.2f} s CPU, "
                              f"{out['first_aside']['bytes_received'] / 1e6:.3f} MB"),
        ("server RSS: start / model / after text / end", f"{mb(out['rss_start'])} / {mb(out['rss_with_model'])} / "
                                                          f"{mb(out['rss_after_text'])} / {mb(out['rss_end'])}"),
        ("server peak RSS (VmHWM)", mb(out["rss_peak"])),
        ("held for the text (ReducedTrace.nbytes)", mb(out["held_bytes"])),
        ("exception boxes", str(out["exceptions"])),
    ]
    return "| measure | value |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--picks", type=int, default=3)
    parser.add_argument("--budget-gb", type=float, default=2.5)
    parser.add_argument("--timeout-s", type=float, default=600)
    parser.add_argument("--screenshot", type=Path, default=ROOT / "artifacts" / "long_explore.png")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.screenshot.parent.mkdir(exist_ok=True)
    out = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(table(out))


if __name__ == "__main__":
    main()
