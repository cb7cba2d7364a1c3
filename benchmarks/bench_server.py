"""The Streamlit server under one and many visitors (a benchmark, not a test): one command, one markdown table,
for any app tree, so before/after is two runs of the same command.

    .venv/bin/python benchmarks/bench_server.py                                  # this tree
    git -C . archive HEAD | tar -x -C /tmp/attnviz-before
    .venv/bin/python benchmarks/bench_server.py --app-dir /tmp/attnviz-before    # the committed code
    .venv/bin/python benchmarks/bench_server.py --load 4x5 --load 10x10 --load 20x10 --json artifacts/b.json

What it measures, all against one `streamlit run DIR/app.py` (this python, headless, free port):

1. One user, default model (all-MiniLM-L6-v2): Enter in Sentence -> idle, p50/p95 wall and server CPU
   seconds per rerun (utime+stime of the server from /proc, delta per rerun); then picking another head in
   the `Head` selectbox -> idle; websocket bytes the page received per rerun.
2. ~512-token SmolLM2-135M-Instruct inputs (a new text each time): Enter -> grid drawn, server CPU, bytes per
   rerun; head picks on that input.
3. Server RSS (VmRSS) at start, after the default model, after the long texts, after their sessions close.
4. N concurrent sessions x M reruns (separate browser contexts, marker words "zebra{session}x{i}"):
   throughput, p50/p95 Enter -> idle, stalls (no idle within --stall-s), exception boxes, cross-session leaks
   (a session's mosaic or token chips showing another session's marker), server CPU per rerun, RSS.

"Idle": the script run started by the action finished (`data-test-script-state` on stApp went running ->
notRunning), the running icon in stStatusWidget is gone, and the mosaic shows the marker (short inputs) or is
a newly drawn figure (512 tokens: the pooled mosaic labels blocks, not every token). See tests/load_driver.py.
The browser runs on the same machine: wall times include Chromium's rendering; server CPU does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import rss_bytes, server_cpu_seconds, streamlit_app  # noqa: E402
from tests.load_driver import (  # noqa: E402
    Session,
    concurrent_load,
    launch,
    long_text,
    marker,
    median,
    percentile,
    sentence,
)

SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
WARM_TEXT = "The keys to the cabinet are on the table."


def mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.0f} MiB"


def sec(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f} s"


def kb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1024:.0f} KiB"


def steps_summary(steps) -> dict:
    ok = [s for s in steps if s.ok]
    return {"n": len(steps), "ok": len(ok),
            "wall_p50_s": median([s.wall_s for s in ok]), "wall_p95_s": percentile([s.wall_s for s in ok], 95),
            "cpu_p50_s": median([s.server_cpu_s for s in ok]),
            "cpu_mean_s": sum(s.server_cpu_s for s in ok) / len(ok) if ok else None,
            "bytes_p50": median([s.bytes_received for s in ok]),
            "exception_boxes": max((s.exceptions for s in steps), default=0),
            "walls": [round(s.wall_s, 3) for s in steps]}


async def single_user(browser, server, args, out: dict, log) -> None:
    pid = server.pid
    session = await Session(browser, 0).open(server.url, timeout_s=args.open_timeout_s)
    out["rss_after_default_model"] = rss_bytes(pid)
    log(f"default model loaded, RSS {mb(out['rss_after_default_model'])}")
    try:
        await session.enter(sentence(0, 999), pid, word=marker(0, 999), timeout_s=args.stall_s)  # warm-up
        steps = []
        for i in range(args.single):
            steps.append(await session.enter(sentence(0, i), pid, word=marker(0, i), timeout_s=args.stall_s))
        out["enter"] = steps_summary(steps)
        log(f"enter: {out['enter']['walls']}")
        picks = []
        for i in range(args.picks):
            picks.append(await session.pick_head(1 + i % 11, pid, timeout_s=args.stall_s))
        out["pick"] = steps_summary(picks)
        log(f"head picks: {out['pick']['walls']}")
    finally:
        await session.close()


async def long_inputs(browser, server, args, out: dict, log) -> None:
    pid = server.pid
    sessions = []
    try:
        t0 = time.perf_counter()
        first = await Session(browser, 0).open(server.url, {"model": SMOLLM, "text": WARM_TEXT},
                                               timeout_s=args.open_timeout_s)
        sessions.append(first)
        out["smollm_load_s"] = time.perf_counter() - t0
        out["rss_after_smollm"] = rss_bytes(pid)
        log(f"SmolLM2 loaded in {out['smollm_load_s']:.1f} s, RSS {mb(out['rss_after_smollm'])}")
        for _ in range(1, args.long_sessions):
            sessions.append(await Session(browser, 0).open(server.url, {"model": SMOLLM, "text": WARM_TEXT},
                                                           timeout_s=args.open_timeout_s))
        steps, tokens = [], []
        for k in range(args.long_texts):
            session = sessions[k * len(sessions) // args.long_texts]
            steps.append(await session.enter(long_text(k), pid, mode="changed", timeout_s=args.long_stall_s))
            tokens.append(await session.page.locator("[data-testid=stMain] span:has(> sub)").count())
        out["long_enter"] = steps_summary(steps)
        out["long_tokens"] = tokens
        log(f"512-token enters: {out['long_enter']['walls']} tokens {tokens}")
        picks = []
        for i in range(args.long_picks):
            picks.append(await sessions[-1].pick_head(1 + i % 8, pid, timeout_s=args.long_stall_s))
        out["long_pick"] = steps_summary(picks)
        log(f"512-token head picks: {out['long_pick']['walls']}")
        out["rss_after_long_texts"] = rss_bytes(pid)
    finally:
        for session in sessions:
            await session.close()
    await asyncio.sleep(args.settle_s)
    out["rss_after_long_sessions_closed"] = rss_bytes(pid)
    log(f"RSS after long texts {mb(out['rss_after_long_texts'])}, "
        f"{args.settle_s:.0f} s after closing {mb(out['rss_after_long_sessions_closed'])}")


async def bench(server, args, log) -> dict:
    out: dict = {"app_dir": str(server.app_dir), "app_dir_has_venv": (server.app_dir / ".venv").exists(),
                 "file_watcher": args.watcher or "auto (Streamlit default)", "rss_start": rss_bytes(server.pid),
                 "server_cpu_at_start_s": server_cpu_seconds(server.pid)}
    async with async_playwright() as p:
        browser = await launch(p)
        try:
            out["errors"] = []
            for skip, section in ((args.skip_single, single_user), (args.skip_long, long_inputs)):
                if skip:
                    continue
                try:
                    await section(browser, server, args, out, log)
                except Exception as error:  # report what was measured; say what failed
                    log(f"{section.__name__} failed: {error!r}")
                    out["errors"].append(f"{section.__name__}: {type(error).__name__}: {str(error)[:200]}")
            out["load"] = []
            for spec in [*args.load, *(f"{spec}+heavy" for spec in args.heavy_load)]:
                n, m = (int(x) for x in spec.lower().removesuffix("+heavy").split("x"))
                log(f"load {spec} ...")
                result = await concurrent_load(browser, server.url, server.pid, n, m, stall_s=args.stall_s,
                                               open_timeout_s=args.open_timeout_s, log=log,
                                               heavy=spec.endswith("+heavy"))
                log(f"  {json.dumps({k: v for k, v in result.items() if k not in ('stalled', 'leak_examples')})}")
                out["load"].append(result)
        finally:
            await browser.close()
    out["rss_end"] = rss_bytes(server.pid)
    return out


def table(out: dict) -> str:
    rows = [("app dir", f"`{out['app_dir']}` (.venv inside: {'yes' if out['app_dir_has_venv'] else 'no'}; "
                        f"file watcher {out['file_watcher']})")]
    if "pick" in out:
        e, p = out["enter"], out["pick"]
        rows += [
            ("MiniLM, 1 user: Enter -> idle (p50 / p95 wall)", f"{sec(e['wall_p50_s'])} / {sec(e['wall_p95_s'])}"
                                                              f" (n={e['ok']}/{e['n']})"),
            ("MiniLM, 1 user: server CPU per rerun (p50 / mean)", f"{sec(e['cpu_p50_s'])} / {sec(e['cpu_mean_s'])}"),
            ("MiniLM, 1 user: bytes sent per rerun (p50)", kb(e["bytes_p50"])),
            ("MiniLM, 1 user: head pick -> idle (p50 / p95 wall)",
             f"{sec(p['wall_p50_s'])} / {sec(p['wall_p95_s'])} (n={p['ok']}/{p['n']})"),
            ("MiniLM, 1 user: server CPU per head pick (p50 / mean)",
             f"{sec(p['cpu_p50_s'])} / {sec(p['cpu_mean_s'])}"),
            ("MiniLM, 1 user: bytes sent per head pick (p50)", kb(p["bytes_p50"])),
        ]
    if "long_pick" in out:
        e, p = out["long_enter"], out["long_pick"]
        tokens = sorted(set(out["long_tokens"]))
        rows += [
            ("SmolLM2, model load (first page with ?model=)", sec(out["smollm_load_s"], 1)),
            (f"SmolLM2 {'/'.join(map(str, tokens))} tokens: Enter -> grid drawn (p50 / p95 wall)",
             f"{sec(e['wall_p50_s'])} / {sec(e['wall_p95_s'])} (n={e['ok']}/{e['n']})"),
            ("SmolLM2 512 tokens: server CPU per rerun (p50 / mean)",
             f"{sec(e['cpu_p50_s'])} / {sec(e['cpu_mean_s'])}"),
            ("SmolLM2 512 tokens: bytes sent per rerun (p50)", kb(e["bytes_p50"])),
            ("SmolLM2 512 tokens: head pick -> idle (p50 wall)", f"{sec(p['wall_p50_s'])} (n={p['ok']}/{p['n']})"),
            ("SmolLM2 512 tokens: server CPU per head pick (p50)", sec(p["cpu_p50_s"])),
            ("SmolLM2 512 tokens: bytes sent per head pick (p50)", kb(p["bytes_p50"])),
            ("SmolLM2 512 tokens: exception boxes", str(max(e["exception_boxes"], p["exception_boxes"]))),
        ]
    rows.append(("RSS at start", mb(out["rss_start"])))
    if "rss_after_default_model" in out:
        rows.append(("RSS after the default model (one session)", mb(out["rss_after_default_model"])))
    if "rss_after_long_sessions_closed" in out:
        rows += [("RSS after SmolLM2 loaded", mb(out["rss_after_smollm"])),
                 (f"RSS after {len(out['long_tokens'])} distinct 512-token SmolLM2 texts",
                  mb(out["rss_after_long_texts"])),
                 ("RSS after those sessions closed", mb(out["rss_after_long_sessions_closed"]))]
    for r in out.get("load", []):
        tag = f"{r['sessions']}x{r['reruns']}" + (" + 1 heavy visitor" if r.get("heavy_visitor") else "")
        rows += [
            (f"load {tag}: throughput", f"{r['throughput_per_s']:.2f} reruns/s ({r['completed']}/{r['attempted']}"
                                        f" in {r['elapsed_s']:.0f} s)"),
            (f"load {tag}: Enter -> idle p50 / p95 / max",
             f"{sec(r['p50_s'])} / {sec(r['p95_s'])} / {sec(r['max_s'])}"),
            (f"load {tag}: stalls (> {r['stall_limit_s']:.0f} s)", str(r["stalls"])),
            (f"load {tag}: Enters dropped by the page, pressed again", str(r.get("lost_enters", "-"))),
            (f"load {tag}: exception boxes", str(r["exception_boxes"])),
            (f"load {tag}: cross-session leaks",
             str(r["leaks"]) + (f" e.g. {r['leak_examples'][:3]}" if r["leaks"] else "")),
            (f"load {tag}: server CPU per rerun", sec(r["server_cpu_per_rerun_s"])),
            (f"load {tag}: bytes sent per rerun (p50)", kb(r["bytes_per_rerun"])),
            (f"load {tag}: RSS before / after", f"{mb(r['rss_before_bytes'])} / {mb(r['rss_after_bytes'])}"),
        ]
    rows.append(("RSS at the end", mb(out["rss_end"])))
    rows += [("error", e) for e in out.get("errors", [])]
    lines = ["| measure | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", type=Path, default=ROOT, help="tree whose app.py is run (default: this repo)")
    parser.add_argument("--sessions", type=int, help="concurrent sessions (with --reruns: one more load run)")
    parser.add_argument("--reruns", type=int, default=5, help="reruns per session with --sessions")
    parser.add_argument("--load", action="append", default=None, metavar="NxM",
                        help="a load run of N sessions x M reruns; repeatable (default 4x5)")
    parser.add_argument("--heavy-load", action="append", default=[], metavar="NxM",
                        help="a load run of N light sessions x M reruns while one more visitor keeps scoring "
                             "probe sets on the Head Finder (light latency with and without a heavy visitor)")
    parser.add_argument("--single", type=int, default=10, help="one-user MiniLM reruns")
    parser.add_argument("--picks", type=int, default=8, help="one-user head picks")
    parser.add_argument("--long-texts", type=int, default=6, help="distinct 512-token SmolLM2 texts")
    parser.add_argument("--long-sessions", type=int, default=2, help="sessions the long texts are spread over")
    parser.add_argument("--long-picks", type=int, default=3, help="head picks on a 512-token input")
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--stall-s", type=float, default=60.0, help="an Enter not idle after this is a stall")
    parser.add_argument("--long-stall-s", type=float, default=180.0)
    parser.add_argument("--open-timeout-s", type=float, default=300.0)
    parser.add_argument("--settle-s", type=float, default=10.0, help="wait after closing sessions before RSS")
    parser.add_argument("--watcher", choices=["auto", "watchdog", "poll", "none"],
                        help="--server.fileWatcherType (default: Streamlit's own, auto)")
    parser.add_argument("--json", type=Path, help="also write every number here")
    args = parser.parse_args()
    args.load = list(args.load or (["4x5"] if args.sessions is None else []))
    if args.sessions is not None:
        args.load.append(f"{args.sessions}x{args.reruns}")
    if args.skip_load:
        args.load = []
    if not (args.app_dir / "app.py").exists():
        parser.error(f"{args.app_dir}/app.py does not exist")

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    extra = (f"--server.fileWatcherType={args.watcher}",) if args.watcher else ()
    started = time.perf_counter()
    with streamlit_app(args.app_dir, extra_args=extra) as server:
        log(f"server pid {server.pid} at {server.url}, app {server.app_dir}, log {server.log_path}")
        out = asyncio.run(bench(server, args, log))
    out["bench_wall_s"] = time.perf_counter() - started
    print(table(out))
    print(f"\n(benchmark took {out['bench_wall_s']:.0f} s; {' '.join(sys.argv[1:]) or 'default options'})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
