"""Drive Explore-page sessions in headless Chromium (async playwright): one implementation for the load test
(tests/browser/test_load.py) and the server benchmark (benchmarks/bench_server.py).

A session is one browser context with one page. "Idle" after an action means: a script run that started
after the action has finished (the `data-test-script-state` attribute Streamlit puts on
`[data-testid=stApp]` went `running` -> `notRunning`; counted by a MutationObserver), the running indicator
(`[data-testid=stStatusWidgetRunningIcon]`, the "Running..." icon inside `stStatusWidget`) is gone, and the
mosaic (the plotly chart with `layout.meta.tile`) shows the marker word, or for a pooled mosaic whose labels
cannot spell the text, is a newly drawn figure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
import statistics
import time
import urllib.parse

from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, GRID_HAS, ROOT, rss_bytes, server_cpu_seconds

# Installed before any page script: counts finished script runs and exposes the idle check.
INIT_JS = """(() => {
  window.__runs = 0;
  window.__starts = 0;
  const seen = new WeakMap();
  new MutationObserver(records => {
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      const next = i + 1 < records.length && records[i + 1].target === r.target
        ? records[i + 1].oldValue : r.target.getAttribute('data-test-script-state');
      if (r.oldValue === 'running' && next === 'notRunning') window.__runs += 1;
      if (r.oldValue !== 'running' && next === 'running') window.__starts += 1;
    }
  }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                        attributeFilter: ['data-test-script-state']});
  window.__mosaic = () => [...document.querySelectorAll('.js-plotly-plot')]
    .find(gd => gd.layout && gd.layout.meta && gd.layout.meta.tile && gd.data && gd.data[0]);
  window.__mark = () => {
    const gd = window.__mosaic();
    window.__markRuns = window.__runs;
    window.__markStarts = window.__starts;
    window.__markData = gd ? gd.data[0] : null;
  };
  window.__idleNow = () => {
    const app = document.querySelector('[data-testid=stApp]');
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
      && !document.querySelector('[data-testid=stStatusWidgetRunningIcon]');
  };
})();"""

GRID_HAS_FN = f"window.__gridHas = {GRID_HAS};"

# mode "marker": the mosaic spells `marker`; "changed": the mosaic is a newly drawn figure (pooled mosaics
# label blocks, not every token); "run": only a finished run (a head pick leaves the mosaic as it was).
IDLE_JS = """([mode, marker]) => {
  if (window.__runs <= window.__markRuns || !window.__idleNow()) return false;
  if (mode === 'run') return true;
  const gd = window.__mosaic();
  if (!gd) return false;
  if (mode === 'changed') return gd.data[0] !== window.__markData;
  return window.__gridHas(marker);
}"""

# The text the page shows for the current input: mosaic layer-0 row labels and the token chips, each
# joined without blanks, "##" and "[1/3]" piece marks (as GRID_HAS does), so a split marker reads whole.
SHOWN_TEXT_JS = """() => {
  const squash = s => s.replace(/[\\s␣]|##|\\[\\d+\\/\\d+\\]/g, '');  // as GRID_HAS
  const gd = window.__mosaic();
  const grid = gd ? (gd.data[0].y || []).map(String).filter(l => l.startsWith('L0 from '))
      .map(l => l.replace(/^L0 from [^:]*:/, '')).join('') : '';
  const chips = [...document.querySelectorAll('[data-testid=stMain] span')]
      .filter(s => s.querySelector(':scope > sub'))
      .map(s => s.firstChild ? s.firstChild.textContent : '').join('');
  return {grid: squash(grid), chips: squash(chips)};
}"""

MARKER_RE = re.compile(r"zebra(\d+)x(\d+)")

SENTENCES = [
    "The keys to the cabinet are on the table",
    "The animal did not cross the street because it was too tired",
    "The author that the critics praise writes beautiful books",
    "The doctor told the nurse that she would arrive at the hospital soon",
]
WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government number "
         "night point home water room mother area money story fact month lot right study book eye job word "
         "business issue side kind house service friend father power hour game line end member law car "
         "city community name president team minute idea kid body information back parent face others level "
         "office door health person art war history party result change morning reason research girl guy "
         "moment air teacher force education foot boy age policy music market sense nation plan college "
         "interest death experience effect class control care field development role effort rate heart drug "
         "show leader light voice wife police mind price report decision son view relationship town road arm "
         "difference value building action model season society tax director position player record paper "
         "space ground form event official matter center couple site project activity star table need court "
         "oil situation cost industry figure street image phone data picture practice piece land product "
         "doctor wall patient worker news test movie north love support technology step baby computer type "
         "attention film tree source organization hair window evidence population site river garden").split()


def marker(session: int, rerun: int) -> str:
    return f"zebra{session}x{rerun}"


def sentence(session: int, rerun: int) -> str:
    """A short sentence carrying the session's marker word for this rerun (new text: a cold trace cache)."""
    return f"{SENTENCES[(session + rerun) % len(SENTENCES)]} {marker(session, rerun)} again."


def long_text(seed: int, words: int = 500) -> str:
    """About 512 SmolLM2 tokens of English words (measured: one token per word, plus the marker's pieces
    and the full stop: 508 tokens), different for every seed; the marker comes first."""
    rng = random.Random(seed)
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"{marker(1000, seed)} {body}."


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values):
    return statistics.median(values) if values else None


@dataclasses.dataclass
class Step:
    """One action and its wait for idle."""

    ok: bool
    wall_s: float
    server_cpu_s: float
    bytes_received: int
    exceptions: int


class Session:
    """One browser context with one Explore page; counts websocket bytes the server sends it."""

    def __init__(self, browser, index: int, viewport=(1300, 1800)):
        self.browser, self.index, self.viewport = browser, index, viewport
        self.context = self.page = None
        self.bytes_received = 0
        self.leaks: list[str] = []
        self.lost_enters = 0  # Enters the page dropped (no script run started): pressed again, and counted
        self.unrecovered_enters = 0  # ... and still no run after pressing again

    async def open(self, url: str, query: dict | None = None, ready: str = "cabinet", timeout_s: float = 180):
        self.context = await self.browser.new_context(viewport={"width": self.viewport[0],
                                                                "height": self.viewport[1]})
        await self.context.add_init_script(INIT_JS + GRID_HAS_FN)
        self.page = await self.context.new_page()
        self.page.on("websocket", self._watch)
        await self.page.goto(url + ("/?" + urllib.parse.urlencode(query) if query else ""))
        await self.page.wait_for_selector("[data-testid=stApp]")
        await self.page.wait_for_function(
            "word => window.__idleNow() && window.__runs > 0 && (word === null || window.__gridHas(word))",
            arg=ready, timeout=timeout_s * 1000, polling=100)
        return self

    def _watch(self, ws) -> None:
        def count(payload) -> None:
            self.bytes_received += len(payload)
        ws.on("framereceived", count)

    async def close(self) -> None:
        if self.context is not None:
            await self.context.close()
            self.context = self.page = None

    async def exceptions(self) -> int:
        return await self.page.locator("[data-testid=stException]").count()

    async def _act(self, action, mode: str, word: str | None, pid: int, timeout_s: float,
                   polling="raf") -> Step:
        await self.page.evaluate("window.__mark()")
        sent, cpu = self.bytes_received, server_cpu_seconds(pid)
        start = time.perf_counter()
        await action()
        try:
            await self.page.wait_for_function(IDLE_JS, arg=[mode, word], timeout=timeout_s * 1000, polling=polling)
            ok = True
        except Exception as error:  # playwright's TimeoutError: the rerun did not finish in time (a stall)
            if "Timeout" not in type(error).__name__:
                raise
            ok = False
            await self.page.screenshot(path=str(ROOT / "artifacts" / f"stall-{self.index}.png"), full_page=True)
        wall = time.perf_counter() - start
        return Step(ok, wall, server_cpu_seconds(pid) - cpu, self.bytes_received - sent, await self.exceptions())

    async def enter(self, text: str, pid: int, word: str | None = None, mode: str = "marker",
                    timeout_s: float = 60, polling="raf", register_s: float = 15) -> Step:
        """Type `text` into Sentence, press Enter, wait for idle with `word` in the mosaic.

        With many browsers on two cores, the page now and then drops an Enter: no script run starts (the
        issue's baseline saw it too). Such an Enter is pressed again once and counted in `lost_enters`,
        so a stall means what it says: a rerun that the server started and did not finish in time."""
        box = self.page.get_by_label("Sentence", exact=True)
        await box.fill(text)

        async def started() -> bool:
            try:
                await self.page.wait_for_function("() => window.__starts > window.__markStarts",
                                                  timeout=register_s * 1000, polling=100)
                return True
            except Exception as error:
                if "Timeout" not in type(error).__name__:
                    raise
                return False

        async def press():
            await box.press("Enter")
            if not await started():
                self.lost_enters += 1
                await box.fill(text)
                await box.press("Enter")
                if not await started():  # still no run: the page kept the Enter; not a server stall
                    self.unrecovered_enters += 1
        return await self._act(press, mode, word, pid, timeout_s, polling)

    async def pick_head(self, head: int, pid: int, timeout_s: float = 60, polling="raf") -> Step:
        """Pick `head` in the Head selectbox; wait for the rerun to finish."""
        label = self.page.get_by_text("Head", exact=True)
        box = self.page.locator("[data-testid=stSelectbox]").filter(has=label).first
        option = self.page.get_by_role("option", name=str(head), exact=True)
        for _attempt in range(3):  # a dropdown opened while the page redraws may close again: retry
            await box.click()
            try:
                await option.wait_for(timeout=10_000)
                break
            except Exception as error:
                if "Timeout" not in type(error).__name__:
                    raise
                await self.page.keyboard.press("Escape")
        else:
            await self.page.screenshot(path=str(ROOT / "artifacts" / f"pick-failed-{self.index}.png"), full_page=True)
            return Step(False, 0.0, 0.0, 0, await self.exceptions())

        async def click():
            await option.click()
        return await self._act(click, "run", None, pid, timeout_s, polling)

    async def foreign_markers(self) -> list[str]:
        """Markers of other sessions that the mosaic or the token chips show (should be none)."""
        shown = await self.page.evaluate(SHOWN_TEXT_JS)
        found = []
        for where, text in shown.items():
            found += [f"{where}:{m.group(0)}" for m in MARKER_RE.finditer(text) if int(m.group(1)) != self.index]
        return found


async def launch(playwright):
    return await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


async def keep_scoring(browser, url: str, stop: asyncio.Event, log=print) -> int:
    """A heavy visitor: on the Head Finder page, press "Score all heads" (the built-in English set, a few
    hundred sentences) again and again until `stop` is set. Returns how many scorings finished."""
    context = await browser.new_context(viewport={"width": 1300, "height": 1800})
    page = await context.new_page()
    runs = 0
    try:
        await page.goto(f"{url}/Head_Finder")
        button = page.get_by_role("button", name="Score all heads")
        await button.wait_for(timeout=300_000)
        while not stop.is_set():
            await button.click()
            await page.wait_for_timeout(300)  # the run starts
            await page.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]",
                                         timeout=600_000)
            runs += 1
    finally:
        await context.close()
    log(f"  heavy visitor finished {runs} scorings")
    return runs


async def concurrent_load(browser, url: str, pid: int, sessions: int, reruns: int, stall_s: float = 60,
                          open_timeout_s: float = 300, log=print, viewport=(1200, 1500),
                          open_batch: int = 4, heavy: bool = False) -> dict:
    """`sessions` browser contexts, all open at once, each typing `reruns` new sentences with its own marker
    words, as fast as its page becomes idle. With `heavy`, one more visitor keeps scoring probe sets on the
    Head Finder meanwhile. Returns the numbers of the load table."""
    opened: list[Session] = []
    stop = asyncio.Event()
    heavy_task = None
    try:
        start_open = time.perf_counter()
        # Opened in batches of `open_batch`: twenty first runs at once on two cores only measure the queue.
        batches = [range(b, min(sessions, b + open_batch)) for b in range(0, sessions, open_batch)]
        for batch in batches:
            opened += await asyncio.gather(*(Session(browser, i, viewport=viewport).open(url, timeout_s=open_timeout_s)
                                             for i in batch))
            log(f"  sessions {list(batch)} open after {time.perf_counter() - start_open:.1f} s")
        rss_before, cpu_before = rss_bytes(pid), server_cpu_seconds(pid)
        steps: list[list[Step]] = [[] for _ in opened]
        stalls: list[str] = []
        unregistered: list[str] = []

        async def drive(session: Session) -> None:
            for i in range(reruns):
                unrecovered = session.unrecovered_enters
                step = await session.enter(sentence(session.index, i), pid, word=marker(session.index, i),
                                           timeout_s=stall_s, polling=100)
                steps[session.index].append(step)
                if not step.ok:
                    # A stall is a rerun the page asked for that did not finish; an Enter that never
                    # started a run, even pressed twice, is counted apart.
                    lost = session.unrecovered_enters > unrecovered
                    (unregistered if lost else stalls).append(f"session {session.index} rerun {i}")
                    continue
                session.leaks += await session.foreign_markers()

        if heavy:
            heavy_task = asyncio.create_task(keep_scoring(browser, url, stop, log))
            await asyncio.sleep(5)  # its first scoring is under way before the light visitors start
        t0 = time.perf_counter()
        await asyncio.gather(*(drive(s) for s in opened))
        elapsed = time.perf_counter() - t0
        cpu = server_cpu_seconds(pid) - cpu_before
        rss_after = rss_bytes(pid)
        flat = [s for per in steps for s in per]
        done = [s.wall_s for s in flat if s.ok]
        exceptions = [await s.exceptions() for s in opened]
        return {
            "sessions": sessions, "reruns": reruns, "attempted": len(flat), "completed": len(done),
            "elapsed_s": elapsed, "throughput_per_s": len(done) / elapsed if elapsed else None,
            "p50_s": median(done), "p95_s": percentile(done, 95), "max_s": max(done) if done else None,
            "stalls": len(stalls), "stalled": stalls, "stall_limit_s": stall_s,
            "exception_boxes": sum(exceptions), "reruns_with_exception_box": sum(1 for s in flat if s.exceptions),
            "lost_enters": sum(s.lost_enters for s in opened),
            "unrecovered_enters": sum(s.unrecovered_enters for s in opened), "unregistered": unregistered,
            "leaks": sum(len(s.leaks) for s in opened), "leak_examples": [x for s in opened for x in s.leaks][:10],
            "server_cpu_s": cpu, "server_cpu_per_rerun_s": cpu / len(done) if done else None,
            "rss_before_bytes": rss_before, "rss_after_bytes": rss_after,
            "bytes_per_rerun": median([s.bytes_received for s in flat if s.ok]), "heavy_visitor": heavy,
        }
    finally:
        stop.set()
        if heavy_task is not None:
            await heavy_task
        for session in opened:
            await session.close()
