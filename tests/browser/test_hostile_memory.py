"""The red team's memory cases (issue 16), against ONE real server on the public host's budget (2.5 GB), driven
by Debian's Chromium: hostile uploads, the Head Finder's examples, its own-sentence box, a long JSON export,
one checkpoint under several spellings, four visitors on a cold model, and a few more. After each case the
server's peak resident memory (VmHWM, /proc/<pid>/status) must stay under the budget, the page must show no
exception box and no traceback, and where something was refused the page must say so.

The cases run in file order on one server: the four-visitor case needs SmolLM2 cold, so it comes first.
Measured peaks and times are printed (pytest -s) and written to artifacts/hostile_memory.json."""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.browser import ROOT, launch_chromium, rss_bytes, streamlit_app
from tests.helpers.load_driver import WORDS, long_text

BUDGET_GB = 2.5
LONG_TOKENS = 4096
LONG_PAGE = "For long texts this page shows"
BUDGET = BUDGET_GB * 1e9
SMOL = quote(SMOLLM, safe="")
REPORT = ROOT / "artifacts" / "hostile_memory.json"
RESULTS: dict[str, dict] = {}

MOSAIC_JS = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .some(gd => gd.layout && gd.layout.meta && gd.layout.meta.tile && gd.data && gd.data[0])"""
IDLE_JS = """() => { const app = document.querySelector('[data-testid=stApp]');
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
        && !document.querySelector('[data-testid=stStatusWidgetRunningIcon]'); }"""


def peak_bytes(pid: int) -> int:
    """The server's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def reset_peak(pid: int) -> None:
    """Start a new high-water mark (writing 5 to clear_refs resets VmHWM): each case gets its own peak."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def record(name: str, server, started: float, **extra) -> int:
    peak = peak_bytes(server.pid)
    RESULTS[name] = {"peak_gb": round(peak / 1e9, 3), "rss_gb": round(rss_bytes(server.pid) / 1e9, 3),
                     "seconds": round(time.perf_counter() - started, 1), **extra}
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(RESULTS, indent=1))
    print(f"\n{name}: {RESULTS[name]}")
    return peak


def assert_clean(page) -> None:
    """No exception box, no traceback, no "something went wrong" on the page."""
    assert page.locator("[data-testid=stException]").count() == 0
    body = page.inner_text("body")
    assert "Traceback" not in body and "Something went wrong on the server" not in body, body[-2000:]


def assert_under_budget(name: str, server, page_or_pages, started: float, **extra) -> None:
    peak = record(name, server, started, **extra)
    for page in page_or_pages if isinstance(page_or_pages, list) else [page_or_pages]:
        assert_clean(page)
    assert peak < BUDGET, (f"{name}: peak RSS {peak / 1e9:.2f} GB over the {BUDGET_GB} GB budget "
                           f"(log: {server.log_path})")


def wait_idle(page, timeout_s: float = 180) -> None:
    page.wait_for_timeout(500)
    page.wait_for_function(IDLE_JS, timeout=timeout_s * 1000, polling=200)


def wait_mosaic(page, timeout_s: float = 240) -> None:
    page.wait_for_function(MOSAIC_JS, timeout=timeout_s * 1000, polling=250)


def words_text(seed: int, chars: int) -> str:
    """English words, different for every seed, cut to exactly `chars` characters."""
    rng = random.Random(seed)
    parts, size = [], 0
    while size < chars:
        word = rng.choice(WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:chars]


def probe_line(n_words: int, seed: int = 0, word: str | None = None) -> str:
    rng = random.Random(seed)
    words = [word or rng.choice(WORDS) for _ in range(n_words)]
    # source after target: scorable for a decoder in the source-to-target direction
    return json.dumps({"relation": "hostile", "words": words, "source": 5, "target": 2}, separators=(",", ":"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_offline(SMOLLM)
    require_offline(MINILM)
    models = tmp_path_factory.mktemp("models")
    # The public host's default limit, set explicitly: past 512 tokens the Explore page takes its long path
    # (reduced traces); three tabs of 4,096-token texts hold more than the traces' store (3 x 208 MB), so the
    # reservations must evict. (With the first estimate of a reduced run's peak this case reached 2.57 GB.)
    env = {"ATTNVIZ_MEMORY_BUDGET_GB": str(BUDGET_GB), "ATTNVIZ_MODEL_DIRS": str(models),
           "ATTNVIZ_MAX_TOKENS": str(LONG_TOKENS)}
    with streamlit_app(env=env) as running:
        running.models = models
        yield running


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = launch_chromium(p)
        yield chromium
        chromium.close()


@pytest.fixture(autouse=True)
def own_peak(server):
    reset_peak(server.pid)


def new_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 2000}, accept_downloads=True)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("[data-testid=stApp]")
    return page


def upload(page, name: str, data: bytes) -> None:
    page.locator("[data-testid=stRadio]").get_by_text("Upload a file").click(timeout=240_000)
    chooser = page.locator("[data-testid=stFileUploader] input[type=file]")
    chooser.wait_for(state="attached", timeout=60_000)
    chooser.set_input_files(files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}])


# ---------------------------------------------------------------------------------------------------
# 7 first: it needs a server that has not loaded SmolLM2 yet


@pytest.mark.slow
def test_four_visitors_open_smollm2_together_on_a_cold_server(server, browser):
    started = time.perf_counter()
    pages = [new_page(browser, f"{server.url}/?model={SMOL}") for _ in range(4)]
    for page in pages:
        wait_mosaic(page)
    for page in pages:
        body = page.inner_text("body")
        assert "Could not load" not in body and "ImportError" not in body, body[-2000:]
    assert_under_budget("7 four visitors, cold SmolLM2", server, pages, started)
    for page in pages:
        page.context.close()


# ---------------------------------------------------------------------------------------------------
# 1, 3: hostile uploads on the Head Finder


def test_a_probe_item_over_the_word_limit_is_refused_with_file_and_line(server, browser):
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    long_file = (probe_line(1500, word="ab") + "\n").encode()
    assert 7_000 < len(long_file) < 8_500  # the report's ~7.5 KB file
    upload(page, "long.jsonl", long_file)
    refusal = page.get_by_text(re.compile(r"This file cannot be read: long\.jsonl, line 1: 1500 words; at most 1000"))
    expect(refusal).to_be_visible(timeout=60_000)
    wait_idle(page)
    assert_under_budget("1a probe item of 1500 words refused", server, page, started, file_bytes=len(long_file))
    page.context.close()


# 1b: one 900-word item, scored while the server holds little else. It once peaked at 3.38 GB: the examples
# computed every head's 900 x 900 word matrix to draw one head.


@pytest.mark.slow
def test_a_900_word_probe_item_is_scored_under_the_budget(server, browser):
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    upload(page, "ok.jsonl", (probe_line(900, seed=1) + "\n").encode())
    page.get_by_role("button", name="Score all heads").click(timeout=120_000)
    scored = page.get_by_text("Best heads against the baselines")
    refused = page.get_by_text(re.compile(r"does not fit the server's memory budget"))
    expect(scored.or_(refused).first).to_be_visible(timeout=300_000)
    wait_idle(page)
    outcome = "scored" if scored.count() else "refused with a message"
    assert_under_budget("1b probe item of 900 words", server, page, started, outcome=outcome)
    page.context.close()


def test_a_30000_word_conllu_sentence_is_refused_within_seconds(server, browser):
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    wait_idle(page)
    lines = [f"{i}\tw{i % 10}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
             for i in range(1, 30_001)]
    data = ("# text = long\n" + "\n".join(lines) + "\n\n").encode()
    started = time.perf_counter()
    upload(page, "long.conllu", data)
    refusal = page.get_by_text(re.compile(
        r"This file cannot be read: long\.conllu, line \d+: a sentence of more than 1000"))
    expect(refusal).to_be_visible(timeout=60_000)
    refused_after = time.perf_counter() - started
    assert refused_after < 15, f"refusal took {refused_after:.1f} s"
    assert_under_budget("3 CoNLL-U sentence of 30000 words refused", server, page, started,
                        refused_after_s=round(refused_after, 1), file_bytes=len(data))
    page.context.close()


# ---------------------------------------------------------------------------------------------------
# 2: the Head Finder's examples on forty long items


@pytest.mark.slow
def test_examples_of_long_items_on_smollm2(server, browser):
    """The red team's forty 560-word items, cut to eight (each is a 512-token pass either way; the examples
    once ran all of them as one padded float32 batch outside the budget)."""
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    data = "".join(probe_line(560, seed=100 + i) + "\n" for i in range(8)).encode()
    upload(page, "long-items.jsonl", data)
    expect(page.get_by_text(re.compile(r"8 items"))).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Score all heads").click(timeout=120_000)
    expect(page.get_by_text("Best heads against the baselines")).to_be_visible(timeout=300_000)
    expect(page.get_by_text(re.compile(r"L\d+ H\d+ on examples"))).to_be_visible(timeout=60_000)
    # A 560 x 560 heatmap cannot be read (nor sent cheaply): such items are scored, and the page says they
    # are not drawn as examples.
    expect(page.get_by_text("Items of more than 96 words are not drawn as examples").first).to_be_visible(
        timeout=60_000)
    wait_idle(page, 300)
    assert_under_budget("2 examples of 8 items of 560 words", server, page, started)
    page.context.close()


# ---------------------------------------------------------------------------------------------------
# 4: the Head Finder's own-sentence box at its limit


@pytest.mark.slow
def test_own_sentence_box_at_20000_characters_on_smollm2(server, browser):
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    box = page.get_by_label("Sentence", exact=True)
    box.wait_for(timeout=120_000)
    wait_idle(page)
    box.click()
    box.fill(words_text(4, 20_050))  # over max_chars: the browser keeps at most 20,000
    assert len(box.input_value()) <= 20_000
    text = words_text(4, 20_000)
    box.fill(text)
    assert len(box.input_value()) == 20_000
    box.press("Enter")
    wait_idle(page, 240)
    # The pickers offer only the words that have tokens (checked exactly by tests/ui/test_public_host.py); here:
    # the page drew them, with no error, and memory stayed under the budget.
    expect(page.get_by_text("From word", exact=True)).to_be_visible(timeout=120_000)
    assert len(text.split()) > 2500
    assert_under_budget("4 own sentence 20000 chars", server, page, started)
    page.context.close()


# ---------------------------------------------------------------------------------------------------
# 5: the JSON export of a long text


@pytest.mark.slow
def test_json_export_of_the_longest_full_trace_on_smollm2(server, browser):
    """The largest export the page offers: a text of about 508 tokens, under the full maps' 512 (a longer one
    takes the long path, which offers no full export)."""
    started = time.perf_counter()
    text = long_text(5)
    page = new_page(browser, f"{server.url}/?model={SMOL}&view=check&text={quote(text)}")
    wait_mosaic(page)
    wait_idle(page)
    button = page.get_by_role("button", name=re.compile(r"Trace \(JSON"))
    refusal = page.get_by_text(re.compile(r"JSON export: needs about [\d.]+ GB"))
    outcome = {}
    if refusal.count():
        outcome["refused"] = refusal.first.inner_text()
    else:
        button.wait_for(timeout=30_000)
        with page.expect_download(timeout=300_000) as download:
            button.click()
        path = download.value.path()
        head = Path(path).read_bytes()[:200]
        outcome["download_bytes"] = Path(path).stat().st_size
        outcome["starts"] = head[:60].decode(errors="replace")
        assert head.lstrip().startswith(b"{") or b"could not build this export" in head, head
    wait_idle(page)
    assert page.get_by_text(LONG_PAGE).count() == 0  # the full path
    assert_under_budget("5 JSON export of a 508-token text", server, page, started, **outcome)
    page.context.close()


# ---------------------------------------------------------------------------------------------------
# 6: one checkpoint under three spellings


@pytest.mark.slow
def test_one_checkpoint_under_three_spellings_is_loaded_once(server, browser):
    started = time.perf_counter()
    folder = server.models / "minilm"
    original = require_offline(MINILM)
    # A symlink to the offline folder was refused ("not a model the app can load"): a copy, as the brief says.
    shutil.copytree(original, folder)
    base = str(server.models)
    spellings = [f"{base}//minilm", f"{base}/./minilm", f"{base}/minilm/../minilm"]
    rss_before = rss_bytes(server.pid)
    pages = [new_page(browser, f"{server.url}/?model={quote(s, safe='')}") for s in spellings]
    for page in pages:
        wait_mosaic(page)
    for page in pages:
        body = page.inner_text("body")
        assert "not a model the app can load" not in body and "Could not load" not in body, body[-2000:]
    grown = rss_bytes(server.pid) - rss_before
    weights = sum(f.stat().st_size for f in Path(original).rglob("*.safetensors"))
    # Three loads would hold three float32 copies (about 3 x the weight file); one holds one.
    assert grown < 2 * weights, f"RSS grew {grown / 1e6:.0f} MB for a {weights / 1e6:.0f} MB checkpoint"
    assert_under_budget("6 one checkpoint, three spellings", server, pages, started,
                        rss_growth_mb=round(grown / 1e6), weights_mb=round(weights / 1e6))
    for page in pages:
        page.context.close()


# ---------------------------------------------------------------------------------------------------
# 8: more of the same spirit


@pytest.mark.slow
def test_a_url_text_over_the_limit_is_ignored(server, browser):
    """A link's `text` longer than the box's 20,000 characters is ignored (the page shows its default). A link
    of 200,000 characters never reaches the app: the server refuses the request line itself."""
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/?model={SMOL}&text={quote(words_text(8, 25_000))}")
    wait_mosaic(page)
    wait_idle(page)
    box = page.get_by_label("Sentence", exact=True)
    assert len(box.input_value()) < 1_000, len(box.input_value())
    assert_under_budget("8a URL text of 25000 chars (over the limit)", server, page, started,
                        shown_chars=len(box.input_value()))
    page.context.close()


@pytest.mark.slow
def test_three_tabs_with_distinct_long_texts_at_once(server, browser):
    started = time.perf_counter()
    pages = [new_page(browser, f"{server.url}/?model={SMOL}&text={quote(words_text(80 + i, 20_000))}")
             for i in range(3)]
    for page in pages:
        wait_mosaic(page, 300)
    for page in pages:
        wait_idle(page, 300)
    for page in pages:  # each drawn from its reduced trace (about 3,100 tokens), computed one after another
        expect(page.get_by_text(LONG_PAGE)).to_be_visible(timeout=300_000)
    assert_under_budget("8b three tabs, distinct 20000-char texts (the long path)", server, pages, started)
    for page in pages:
        page.context.close()


@pytest.mark.slow
def test_rapid_cancel_and_rerun_of_the_scoring(server, browser):
    started = time.perf_counter()
    page = new_page(browser, f"{server.url}/Head_Finder?model={SMOL}")
    run = page.get_by_role("button", name="Score all heads")
    cancel = page.get_by_role("button", name="Cancel")
    for _ in range(2):
        run.click(timeout=120_000)
        cancel.click(timeout=60_000)
        expect(page.get_by_text("Cancelled: nothing was kept.")).to_be_visible(timeout=30_000)
    run.click(timeout=60_000)
    expect(page.get_by_text("Best heads against the baselines")).to_be_visible(timeout=300_000)
    wait_idle(page)
    assert_under_budget("8c cancel/rerun x2 then a full scoring", server, page, started)
    page.context.close()
