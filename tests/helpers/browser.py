"""A real Streamlit server and Debian's Chromium, for the end-to-end test and the speed benchmark."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialing out, which this machine refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def server_environment() -> dict:
    """This environment, less the test process's own memory budget (tests/conftest.py): a server runs
    with the app's default, as on a public host."""
    return {k: v for k, v in os.environ.items() if k != "ATTNVIZ_MEMORY_BUDGET_GB"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(timeout: float = 120.0, app: Path = ROOT / "app.py"):
    """`streamlit_app` for one app file: yields only the base URL."""
    with streamlit_app(app.parent, app.name, timeout=timeout) as server:
        yield server.url


def launch_chromium(playwright):
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# JavaScript: does the mosaic (the plotly chart with layout.meta.tile) show `word`? The layer-0 row labels
# ("L0 from 3:the") spell the text token by token; joined without spaces, "##" word-piece marks and
# "[1/3]" byte-piece marks, they contain every word, even one split into word pieces or single bytes.
GRID_HAS = """word => [...document.querySelectorAll('.js-plotly-plot')].some(gd => {
    if (!(gd.layout && gd.layout.meta && gd.layout.meta.tile && gd.data && gd.data[0])) return false;
    const text = (gd.data[0].y || []).map(String).filter(label => label.startsWith('L0 from '))
        .map(label => label.replace(/^L0 from [^:]*:/, '')).join('').replace(/[\\s␣]|##|\\[\\d+\\/\\d+\\]/g, '');
    return text.includes(word);
})"""

# JavaScript: page coordinates of the mosaic's pick point for [layer, head].
TILE_CENTRE = """([layer, head]) => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout.meta && g.layout.meta.tile);
    const pick = gd._fullData[1], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const k = pick.customdata.findIndex(c => c[0] === layer && c[1] === head);
    const box = gd.getBoundingClientRect();
    return [xa.l2p(xa.d2l(pick.x[k])) + xa._offset + box.left, ya.l2p(ya.d2l(pick.y[k])) + ya._offset + box.top];
}"""


# ---- additions for the load test and the server benchmark (tests/helpers/load_driver.py, benchmarks/bench_server.py)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class StreamlitServer:
    url: str
    pid: int
    process: subprocess.Popen
    app_dir: Path
    log_path: Path | None


@contextlib.contextmanager
def streamlit_app(app_dir: Path = ROOT, script: str = "app.py", timeout: float = 120.0,
                  extra_args: tuple[str, ...] = (), env: dict | None = None):
    """Like `streamlit_server`, for any app tree: `streamlit run DIR/app.py` with cwd and PYTHONPATH set to
    DIR, this same python, headless, on a free port. Yields a `StreamlitServer` (url, pid of the server)."""
    app_dir = Path(app_dir).resolve()
    port = free_port()
    artifacts = ROOT / "artifacts"
    artifacts.mkdir(exist_ok=True)
    log_path = artifacts / f"streamlit-{port}.log"
    log = open(log_path, "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app_dir / script), "--server.headless=true",
         f"--server.port={port}", "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", *extra_args],
        cwd=app_dir, stdout=log, stderr=subprocess.STDOUT,
        env={**server_environment(), "PYTHONPATH": str(app_dir), **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not become healthy (log: {log_path})")
            time.sleep(0.5)
        yield StreamlitServer(url=url, pid=process.pid, process=process, app_dir=app_dir, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()


def server_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": fields[0] is the state (field 3)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime: fields 14 and 15


def peak_rss_bytes(pid: int) -> int:
    """Peak resident set size of a process so far (VmHWM in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def idle_cpu(pid: int, seconds: float = 3.0) -> float:
    before = server_cpu_seconds(pid)
    time.sleep(seconds)
    return server_cpu_seconds(pid) - before


def goes_idle(pid: int, within: float) -> list[float]:
    """CPU seconds of 3 s windows until one is under 1 s (idle) or `within` seconds have passed. A scan left
    running would keep every window near 3 s for a minute or more (270 passes)."""
    windows, deadline = [], time.monotonic() + within
    while time.monotonic() < deadline:
        windows.append(round(idle_cpu(pid), 2))
        if windows[-1] < 1.0:
            break
    return windows


# The page's script is not running (Streamlit marks the app element with its state).
IDLE = "[data-testid=stApp][data-test-script-state=notRunning]"


def open_tab(page, name: str, timeout: float = 240_000) -> None:
    """Open Explore's tab `name` and wait for its views: a switch reruns the page (only the open tab's views
    run, ui/explore.py), and a click made while that rerun is under way can be lost."""
    page.get_by_role("tab", name=name).click(timeout=timeout)
    page.wait_for_function("""name => [...document.querySelectorAll('[role=tab]')].some(
        tab => tab.getAttribute('aria-selected') === 'true' && tab.innerText.trim() === name)""", arg=name,
                           timeout=timeout)
    page.wait_for_timeout(500)  # the rerun's start
    page.wait_for_selector(IDLE, timeout=timeout)


def click_until(page, button, started, tries: int = 3) -> None:
    """Click `button` until `started()` (a wait that raises on its timeout) passes: a click made while the page
    still reruns can be dropped. Stops once the button is gone (the job it starts has taken its place)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        if not button.count():
            return
        button.click()
        try:
            started()
            return
        except PlaywrightTimeout:
            page.wait_for_selector(IDLE, timeout=120_000)  # the rerun that took the click, over
