"""The Streamlit server under one and many visitors (a benchmark, not a test): one command, one markdown table,
for any app tree, so before/after is two runs of the same command.

    .venv/bin/python benchmarks/bench_server.py                                  # this tree
    git -C . archive HEAD | tar -x -C /tmp/attnviz-before
    .venv/bin/python benchmarks/bench_server.py --app-dir /tmp/attnviz-before    # the committed code
    .venv/bin/python benchmarks/bench_server.py --load 4x5 --load 10x10 --load 20x10 --json artifacts/b.json
    .venv/bin/python benchmarks/bench_server.py --skip-single --skip-long --skip-load --flood 5 --json /tmp/flood.json

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
5. `--flood N` (issue 16, "Fair under floods"): one light visitor on the default model does --flood-reruns K
   short reruns (Enter -> idle, as in 1) alone; then N more browser contexts ("tabs") open on
   SmolLM2-135M-Instruct and each keeps submitting new distinct ~512-token texts (`long_text`, seeds of its
   own) until the light visitor has done K more short reruns beside them. Reports the light p50/p95 alone and
   beside the flood and their ratio (target: <= 2x), flood reruns completed, server CPU seconds, peak RSS
   (VmHWM) and RSS at the end, and every fallback seen on any page (sidebar alert boxes: error / info /
   warning, "Could not load", "Showing ... instead", "cannot be shown", "random model", a change of the model facts
   caption),
   apart from budget refusals (a line naming the memory budget: a trace, view or export refused), error
   messages and exception boxes, each with the page's text; each page is scanned after every rerun.
   A light rerun not idle within --flood-stall-s (30 s) is a stall, its wall counted as that; a stall whose
   run finished without the marker in the mosaic (a random model's pooled mosaic) is said so.

The server runs with ATTNVIZ_MEMORY_BUDGET_GB set explicitly (--budget-gb, default 2.5: the public host's).

"Idle": the script run started by the action finished (`data-test-script-state` on stApp went running ->
notRunning), the running icon in stStatusWidget is gone, and the mosaic shows the marker (short inputs) or is
a newly drawn figure (512 tokens: the pooled mosaic labels blocks, not every token). See tests/helpers/load_driver.py.
The browser runs on the same machine: wall times include Chromium's rendering; server CPU does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.browser import peak_rss_bytes, rss_bytes, server_cpu_seconds, streamlit_app  # noqa: E402
from tests.helpers.load_driver import (  # noqa: E402
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

# Words on a page that mean a visitor did not get the model it asked for (the sidebar's alert boxes count too,
# and a change of the model facts caption) ...
FALLBACK_RE = re.compile(r"random model|randomly initiali[sz]ed|could not load|fell back|falling back|"
                         r"showing .{1,120} instead|cannot be shown|does not fit this server's memory budget", re.I)
# ... or a result it asked for: the budget refused it (a trace, a view, an export) or the server failed.
BUDGET_RE = re.compile(r"needs about|memory budget", re.I)
ERROR_RE = re.compile(r"something went wrong|could not run", re.I)

# Every alert box (sidebar or main), exception boxes, and the model facts caption of the sidebar.
PAGE_STATE_JS = """() => {
  const side = document.querySelector('[data-testid=stSidebar]');
  const alerts = [...document.querySelectorAll('[data-testid=stAlert]')].map(a => ({
      sidebar: !!(side && side.contains(a)), text: a.innerText.trim().slice(0, 400)}));
  const facts = side ? [...side.querySelectorAll('[data-testid=stCaptionContainer]')].map(c => c.innerText)
      .find(t => t.includes(' layers ')) || null : null;
  const app = document.querySelector('[data-testid=stApp]');
  return {alerts, facts, exceptions: document.querySelectorAll('[data-testid=stException]').length,
          text: app ? app.innerText : ''};
}"""


class PageWatch:
    """What one page showed over the flood: every alert text (deduplicated), fallback lines, exception boxes,
    and whether its model facts caption ever changed from the first one seen."""

    def __init__(self, name: str):
        self.name, self.facts_first, self.facts_changed = name, None, []
        self.alerts: dict[str, dict] = {}
        self.fallback_lines: dict[str, str] = {}
        self.budget_lines: dict[str, str] = {}
        self.error_lines: dict[str, str] = {}
        self.max_exceptions = 0

    async def scan(self, session: Session, when: str) -> None:
        try:
            state = await session.page.evaluate(PAGE_STATE_JS)
        except Exception as error:  # a page closing under us
            self.alerts.setdefault(f"(scan failed: {type(error).__name__})", {"sidebar": False, "first": when})
            return
        for alert in state["alerts"]:
            self.alerts.setdefault(alert["text"], {"sidebar": alert["sidebar"], "first": when})
        for line in state["text"].splitlines():
            for pattern, found in ((FALLBACK_RE, self.fallback_lines), (ERROR_RE, self.error_lines),
                                   (BUDGET_RE, self.budget_lines)):
                if pattern.search(line):
                    found.setdefault(line.strip()[:400], when)
                    break
        self.max_exceptions = max(self.max_exceptions, state["exceptions"])
        if state["facts"]:
            if self.facts_first is None:
                self.facts_first = state["facts"]
            elif state["facts"] != self.facts_first and state["facts"] not in self.facts_changed:
                self.facts_changed.append(state["facts"])

    def fallback(self) -> bool:
        return bool(self.fallback_lines or self.facts_changed or any(a["sidebar"] for a in self.alerts.values()))

    def report(self) -> dict:
        return {"page": self.name, "fallback": self.fallback(), "exception_boxes": self.max_exceptions,
                "facts": self.facts_first, "facts_changed_to": self.facts_changed,
                "alerts": [{"text": k, **v} for k, v in self.alerts.items()],
                "fallback_lines": [{"text": k, "first": v} for k, v in self.fallback_lines.items()],
                "budget_lines": [{"text": k, "first": v} for k, v in self.budget_lines.items()],
                "error_lines": [{"text": k, "first": v} for k, v in self.error_lines.items()]}


def light_ratio(result: dict) -> float | None:
    """The light visitor's p50 beside the flood over its p50 alone; a stall counts at its wall (the limit)."""
    a, b = median(result["alone"]["walls"]), median(result["beside"]["walls"])
    return b / a if a and b is not None else None


async def flood(browser, server, args, out: dict, log) -> None:
    """--flood N: one light visitor's short reruns alone, then beside N tabs submitting 512-token texts."""
    pid, k, n = server.pid, args.flood_reruns, args.flood
    result: dict = {"tabs": n, "light_reruns": k, "flood_model": SMOLLM, "budget_gb": args.budget_gb,
                    "long_stall_s": args.long_stall_s, "light_stall_s": args.flood_stall_s}
    out["flood"] = result
    light_watch = PageWatch("light")
    watches = [light_watch]
    light = await Session(browser, 0).open(server.url, timeout_s=args.open_timeout_s)
    tabs: list[Session] = []
    stop = asyncio.Event()
    tasks: list[asyncio.Task] = []
    try:
        await light.enter(sentence(0, 999), pid, word=marker(0, 999), timeout_s=args.stall_s)  # warm-up
        await light_watch.scan(light, "warm-up")
        cpu0 = server_cpu_seconds(pid)
        alone = []
        for i in range(k):
            alone.append(await light.enter(sentence(0, i), pid, word=marker(0, i), timeout_s=args.stall_s))
            await light_watch.scan(light, f"alone {i}")
        result["alone"] = steps_summary(alone)
        result["server_cpu_alone_s"] = server_cpu_seconds(pid) - cpu0
        result["rss_before_flood"] = rss_bytes(pid)
        result["peak_rss_before_flood"] = peak_rss_bytes(pid)
        log(f"flood: light alone {result['alone']['walls']}, RSS {mb(result['rss_before_flood'])}")

        cpu1, t_open = server_cpu_seconds(pid), time.perf_counter()
        tabs = list(await asyncio.gather(*(
            Session(browser, 1 + j, viewport=(1200, 1500)).open(
                server.url, {"model": SMOLLM, "text": WARM_TEXT}, timeout_s=args.open_timeout_s)
            for j in range(n))))
        result["tabs_open_s"] = time.perf_counter() - t_open
        log(f"flood: {n} SmolLM2 tabs open after {result['tabs_open_s']:.1f} s, RSS {mb(rss_bytes(pid))}")
        tab_watches = [PageWatch(f"tab {j}") for j in range(n)]
        watches += tab_watches
        for tab, watch in zip(tabs, tab_watches):
            await watch.scan(tab, "opened")
        flood_steps: list[list] = [[] for _ in tabs]
        flood_errors: list[str] = []
        stalls: list[str] = []

        async def keep_flooding(j: int) -> None:
            tab, i = tabs[j], 0
            while not stop.is_set():
                seed = 10_000 * (j + 1) + i  # each tab its own seeds: every text is new to the server
                try:
                    step = await tab.enter(long_text(seed), pid, mode="changed", timeout_s=args.long_stall_s,
                                           polling=100)
                except Exception as error:  # one tab failing must not end the others' flood
                    flood_errors.append(f"tab {j} rerun {i}: {type(error).__name__}: {str(error)[:200]}")
                    log(f"flood: {flood_errors[-1]}")
                    return
                flood_steps[j].append(step)
                if not step.ok:
                    stalls.append(f"tab {j} rerun {i}")
                await tab_watches[j].scan(tab, f"rerun {i}")
                i += 1

        t_flood = time.perf_counter()
        tasks = [asyncio.create_task(keep_flooding(j)) for j in range(n)]
        await asyncio.sleep(args.flood_lead_s)  # every tab's first long text is under way
        beside, light_stalls = [], []
        for i in range(k):
            beside.append(await light.enter(sentence(0, 100 + i), pid, word=marker(0, 100 + i),
                                            timeout_s=args.flood_stall_s))
            await light_watch.scan(light, f"beside {i}")
            note = ""
            if not beside[-1].ok:
                finished = await light.page.evaluate("() => window.__idleNow() && window.__runs > window.__markRuns")
                note = (" (STALL: the run finished but the mosaic does not spell the marker: another model?)"
                        if finished else " (STALL: still running)")
                light_stalls.append(f"rerun {i}{note}")
            log(f"flood: light rerun {i} beside the flood {beside[-1].wall_s:.2f} s{note}, flood reruns so far "
                f"{sum(len(s) for s in flood_steps)}, RSS {mb(rss_bytes(pid))}")
        result["light_stalls"] = light_stalls
        result["beside"] = steps_summary(beside)
        result["flood_s"] = time.perf_counter() - t_flood
        stop.set()
        done, pending = await asyncio.wait(tasks, timeout=args.flood_drain_s)  # tabs finish their rerun
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        result["server_cpu_flood_s"] = server_cpu_seconds(pid) - cpu1  # tabs opening + flood + drain
        result["cancelled_tab_reruns"] = len(pending)
        flat = [s for per in flood_steps for s in per]
        result["flood_reruns_completed"] = sum(1 for s in flat if s.ok)
        result["flood_reruns_per_tab"] = [sum(1 for s in per if s.ok) for per in flood_steps]
        result["flood_enter"] = steps_summary(flat)
        result["flood_stalls"], result["flood_errors"] = stalls, flood_errors
        result["flood_lost_enters"] = sum(t.lost_enters for t in tabs)
        result["light_lost_enters"] = light.lost_enters
        result["p50_ratio"] = light_ratio(result)
        await light_watch.scan(light, "end")
        for tab, watch in zip(tabs, tab_watches):
            await watch.scan(tab, "end")
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        result["pages"] = [w.report() for w in watches]
        result["fallback_pages"] = [w.name for w in watches if w.fallback()]
        result["budget_pages"] = [w.name for w in watches if w.budget_lines]
        result["error_pages"] = [w.name for w in watches if w.error_lines]
        result["exception_boxes"] = sum(w.max_exceptions for w in watches)
        result["peak_rss"] = peak_rss_bytes(pid)
        result["rss_end_of_flood"] = rss_bytes(pid)
        for session in [light, *tabs]:
            await session.close()
    log(f"flood: light beside {result['beside']['walls']}, ratio {result['p50_ratio']}, "
        f"{result['flood_reruns_completed']} flood reruns, fallbacks on {result['fallback_pages'] or 'no page'}")


async def bench(server, args, log) -> dict:
    out: dict = {"app_dir": str(server.app_dir), "app_dir_has_venv": (server.app_dir / ".venv").exists(),
                 "budget_gb": args.budget_gb,
                 "file_watcher": args.watcher or "auto (Streamlit default)", "rss_start": rss_bytes(server.pid),
                 "server_cpu_at_start_s": server_cpu_seconds(server.pid)}
    async with async_playwright() as p:
        browser = await launch(p)
        try:
            out["errors"] = []
            for skip, section in ((args.skip_single, single_user), (args.skip_long, long_inputs),
                                  (not args.flood, flood)):
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
    f = out.get("flood")
    if f and "beside" in f:
        a, b, fe = f["alone"], f["beside"], f["flood_enter"]
        tag = f"flood {f['tabs']} tabs"
        ratio = light_ratio(f)
        ratio = "-" if ratio is None else f"{ratio:.2f}x"
        a_all, b_all = (median(x["walls"]) for x in (a, b))
        a95, b95 = (percentile(x["walls"], 95) for x in (a, b))
        rows += [
            (f"{tag}: budget (ATTNVIZ_MEMORY_BUDGET_GB)", f"{f['budget_gb']:g} GB"),
            (f"{tag}: light visitor alone, Enter -> idle p50 / p95 (stalls at the limit)",
             f"{sec(a_all)} / {sec(a95)} (ok {a['ok']}/{a['n']})"),
            (f"{tag}: light visitor beside the flood, p50 / p95 / max (stalls at the limit)",
             f"{sec(b_all)} / {sec(b95)} / {sec(max(b['walls'], default=None))} (ok {b['ok']}/{b['n']})"),
            (f"{tag}: light visitor beside the flood, p50 of the reruns that finished",
             f"{sec(b['wall_p50_s'])} (n={b['ok']})"),
            (f"{tag}: light p50 beside / alone (target <= 2x)", ratio),
            (f"{tag}: SmolLM2 tabs open (model load)", sec(f["tabs_open_s"], 1)),
            (f"{tag}: 512-token reruns completed (per tab)",
             f"{f['flood_reruns_completed']} in {f['flood_s']:.0f} s ({f['flood_reruns_per_tab']}); "
             f"p50 {sec(fe['wall_p50_s'])}; {f['cancelled_tab_reruns']} still running at the end, cancelled"),
            (f"{tag}: light stalls (> {f['light_stall_s']:.0f} s, counted at that wall)",
             f"{len(f['light_stalls'])}" + (f": {'; '.join(f['light_stalls'][:3])}" if f["light_stalls"] else "")),
            (f"{tag}: flood stalls (> {f['long_stall_s']:.0f} s) / tab errors",
             f"{len(f['flood_stalls'])} / {len(f['flood_errors'])}"),
            (f"{tag}: server CPU alone / tabs + flood", f"{sec(f['server_cpu_alone_s'], 1)} / "
                                                       f"{sec(f['server_cpu_flood_s'], 1)}"),
            (f"{tag}: RSS before flood / end / peak (VmHWM)",
             f"{mb(f['rss_before_flood'])} / {mb(f['rss_end_of_flood'])} / {mb(f['peak_rss'])}"),
            (f"{tag}: pages that fell back to another model (sidebar alert, \"random model\", ...)",
             ", ".join(f["fallback_pages"]) or "none"),
            (f"{tag}: pages with a budget refusal (trace, view or export)", ", ".join(f["budget_pages"]) or "none"),
            (f"{tag}: pages with an error message / exception boxes",
             f"{', '.join(f['error_pages']) or 'none'} / {f['exception_boxes']}"),
        ]
        for page in f["pages"]:
            for kind in ("fallback_lines", "error_lines", "budget_lines"):
                for line in page[kind][:3]:
                    rows.append((f"{tag}: {page['page']} showed (first at {line['first']})",
                                 line["text"][:200].replace("|", "/")))
            if page["facts_changed_to"]:
                rows.append((f"{tag}: {page['page']} model changed", f"{page['facts']} -> {page['facts_changed_to']}"))
    elif f:
        rows.append(("flood", "did not finish: see error"))
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
    parser.add_argument("--flood", type=int, default=0, metavar="N",
                        help="N tabs keep submitting new 512-token SmolLM2 texts while one light visitor does "
                             "--flood-reruns short MiniLM reruns; that visitor's p50 alone first (issue 16)")
    parser.add_argument("--flood-reruns", type=int, default=10, metavar="K",
                        help="the light visitor's reruns, alone and beside the flood")
    parser.add_argument("--flood-lead-s", type=float, default=5.0,
                        help="seconds the flood runs before the light visitor's first rerun beside it")
    parser.add_argument("--flood-stall-s", type=float, default=30.0,
                        help="a light rerun beside the flood not idle after this is a stall (its wall counts as this)")
    parser.add_argument("--flood-drain-s", type=float, default=60.0,
                        help="after the light reruns, wait this long for the tabs' reruns under way")
    parser.add_argument("--budget-gb", type=float, default=2.5,
                        help="ATTNVIZ_MEMORY_BUDGET_GB for the server (default 2.5, the public host's)")
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
    env = {"ATTNVIZ_MEMORY_BUDGET_GB": f"{args.budget_gb:g}"}
    with streamlit_app(args.app_dir, extra_args=extra, env=env) as server:
        log(f"server pid {server.pid} at {server.url}, app {server.app_dir}, log {server.log_path}, "
            f"ATTNVIZ_MEMORY_BUDGET_GB={env['ATTNVIZ_MEMORY_BUDGET_GB']}")
        out = asyncio.run(bench(server, args, log))
    out["bench_wall_s"] = time.perf_counter() - started
    print(table(out))
    print(f"\n(benchmark took {out['bench_wall_s']:.0f} s; {' '.join(sys.argv[1:]) or 'default options'})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
