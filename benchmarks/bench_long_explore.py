"""A long text in the Explore page, in headless Chromium (a benchmark, not a test): issue 20's app targets.

One `streamlit run app.py` (this python, headless, ATTNVIZ_MEMORY_BUDGET_GB=2.5 as the public host), one
browser page on SmolLM2-135M-Instruct. A text of about --tokens tokens (random English words, one token each)
is typed into Sentence and Enter pressed: the time and server CPU seconds (utime + stime of the server process,
from /proc, all its threads) until the mosaic is drawn, and the websocket bytes the page received; then head
picks, the word level and the first token set aside, each a rerun measured the same way; the server's RSS
(VmRSS) before and after, and its peak (VmHWM). What the app holds for the text is ReducedTrace.nbytes of the
same text, computed in this process afterwards (the object the server keeps).

    .venv/bin/python benchmarks/bench_long_explore.py [--tokens 4096 ...] [--picks 3] [--json out.json]

Each length runs in a fresh server with ATTNVIZ_MAX_TOKENS set to it (the text is cut there); 512 tokens is
the full-maps path (what every text was limited to before), longer ones the reduced path.
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

from tests.helpers.browser import peak_rss_bytes, rss_bytes, streamlit_app  # noqa: E402
from tests.helpers.load_driver import WORDS, Session, launch  # noqa: E402

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
WARM_TEXT = "The keys to the cabinet are on the table."


def long_text(tokens: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "zebra " + " ".join(rng.choice(WORDS) for _ in range(tokens + 40)) + "."  # truncated at the limit


async def toggle(session: Session, label: str, pid: int, timeout_s: float):
    """Click a toggle or radio option by its label; wait for the rerun to end with a new mosaic."""
    async def click():
        await session.page.get_by_text(label, exact=True).first.click()
    return await session._act(click, "changed", None, pid, timeout_s)


async def run(args, tokens: int) -> dict:
    out: dict = {"tokens_asked": tokens}
    env = {**os.environ, "ATTNVIZ_MEMORY_BUDGET_GB": str(args.budget_gb), "ATTNVIZ_MAX_TOKENS": str(tokens)}
    with streamlit_app(ROOT, env=env, timeout=300) as server:
        pid = server.pid
        out["rss_start"] = rss_bytes(pid)
        async with async_playwright() as p:
            browser = await launch(p)
            session = await Session(browser, 0).open(server.url, {"model": SMOLLM, "text": WARM_TEXT}, timeout_s=600)
            out["rss_with_model"] = rss_bytes(pid)
            text = long_text(tokens)
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
            await session.page.screenshot(path=str(args.screenshot.with_stem(f"{args.screenshot.stem}_{tokens}")),
                                          full_page=True)
            out["exceptions"] = await session.exceptions()
            out["rss_end"], out["rss_peak"] = rss_bytes(pid), peak_rss_bytes(pid)
            await session.close()
            await browser.close()
    import attnviz  # the same text, to count what the server holds for it
    from attnviz.plots.pooling import tile_cells
    from attnviz.workbench import traces

    model = attnviz.load(SMOLLM, max_tokens=tokens)
    if tokens <= 512:  # the full path: the float16 trace the app keeps
        out["held_bytes"] = traces.nbytes(traces.compact(model.run(text)))
    else:
        out["held_bytes"] = model.run_reduced(text, tile=tile_cells(model.info.n_layers, model.info.n_heads)).nbytes
    return out


def table(results: list[dict]) -> str:
    mb = lambda n: f"{n / 1e6:,.0f}"  # noqa: E731
    head = ("| tokens | Enter → mosaic: wall s | server CPU s | MB received | head pick: CPU s (max) | MB | "
            "word level: CPU s | MB | first aside: CPU s | MB | RSS with model MB | after text MB | "
            "peak RSS MB | held for the text MB | exceptions |")
    rows = [head, "|" + "---:|" * (head.count("|") - 1)]
    for out in results:
        picks = out["picks"]
        rows.append(
            f"| {out['tokens_drawn']:,} | {out['enter']['wall_s']:.1f} | {out['enter']['server_cpu_s']:.1f} | "
            f"{out['enter']['bytes_received'] / 1e6:.2f} | {max(p['server_cpu_s'] for p in picks):.2f} | "
            f"{max(p['bytes_received'] for p in picks) / 1e6:.2f} | {out['word_level']['server_cpu_s']:.2f} | "
            f"{out['word_level']['bytes_received'] / 1e6:.2f} | {out['first_aside']['server_cpu_s']:.2f} | "
            f"{out['first_aside']['bytes_received'] / 1e6:.2f} | {mb(out['rss_with_model'])} | "
            f"{mb(out['rss_after_text'])} | {mb(out['rss_peak'])} | {mb(out['held_bytes'])} | {out['exceptions']} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[4096])
    parser.add_argument("--picks", type=int, default=3)
    parser.add_argument("--budget-gb", type=float, default=2.5)
    parser.add_argument("--timeout-s", type=float, default=600)
    parser.add_argument("--screenshot", type=Path, default=ROOT / "artifacts" / "long_explore.png")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.screenshot.parent.mkdir(exist_ok=True)
    results = []
    for tokens in args.tokens:
        results.append(asyncio.run(run(args, tokens)))
        print(table(results[-1:]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
