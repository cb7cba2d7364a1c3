"""A real Streamlit server and Debian's Chromium, for the end-to-end test and the speed benchmark."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialing out, which this machine refuses.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(timeout: float = 120.0, app: Path = ROOT / "app.py"):
    """Run `streamlit run app.py` on a free port until the block ends; yields the base URL."""
    port = free_port()
    artifacts = ROOT / "artifacts"
    log = open(artifacts / f"streamlit-{port}.log", "w") if artifacts.is_dir() else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless=true",
         f"--server.port={port}", "--server.address=127.0.0.1", "--browser.gatherUsageStats=false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
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
                raise RuntimeError("streamlit did not become healthy")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def launch_chromium(playwright):
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# JavaScript: does the mosaic (the plotly chart with layout.meta.tile) show `word`? The layer-0 row labels
# ("L0 from 3:the") spell the text token by token; joined without spaces they contain every word, even
# one split into word pieces or single bytes.
GRID_HAS = """word => [...document.querySelectorAll('.js-plotly-plot')].some(gd => {
    if (!(gd.layout && gd.layout.meta && gd.layout.meta.tile && gd.data && gd.data[0])) return false;
    const text = (gd.data[0].y || []).map(String).filter(label => label.startsWith('L0 from '))
        .map(label => label.replace(/^L0 from [^:]*:/, '')).join('').replace(/[\\s␣]/g, '');
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
