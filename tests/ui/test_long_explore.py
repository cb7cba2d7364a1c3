"""The Explore page on long texts (ui/long_explore.py): past FULL_MAPS_TOKENS the page draws a reduced trace.

The reference is the page's own full-map path, itself checked against Hugging Face's attentions: the same text
drawn both ways (the threshold lowered so that a short text takes the long path) must give the same mosaic
cells, the same head-detail map and the same head profile, for every view option. Then Cancel (the run stops,
and does not start again by itself), the token limit setting, a link that cannot carry a long text, and what a
reduced run reserves against the peaks it reaches in a warm process."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnviz.ui.guard import workbench
from attnviz.ui.long_explore import reduced_npz_of
from attnviz.ui.url_state import MAX_TEXT
from attnviz.workbench import Cancelled, shelf
from tests.conftest import MINILM, ROOT, SMOLLM, require_offline
from tests.helpers import reduced_peak
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, z_array

# About 60 SmolLM2 tokens: under the head detail's 96-token window, so the whole head is drawn both ways.
TEXT = ("The keys to the old cabinet are on the table. The animal didn't cross the street because it was "
        "too tired, and the author that the critics praise writes beautiful books.")
LONG_NOTE = "For long texts this page shows"


def explore(monkeypatch, full_maps_tokens: int, text: str = TEXT, model: str = SMOLLM, **params) -> AppTest:
    monkeypatch.setattr(shelf, "FULL_MAPS_TOKENS", full_maps_tokens)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": model, "text": text, **params})
    finish_jobs(at.run())
    assert_clean(at)
    return at


def profile_row(at: AppTest) -> dict:
    table = next(d.value for d in at.dataframe if "entropy" in " ".join(d.value.columns))
    return table.iloc[0].to_dict()


@pytest.mark.parametrize("options", [{}, {"level": "word"}, {"first_aside": "1"},
                                     {"first_aside": "1", "level": "word"}],
                         ids=["tokens", "words", "first-aside", "first-aside-words"])
def test_a_long_text_draws_what_the_full_maps_draw(monkeypatch, options):
    require_offline(SMOLLM)
    params = {"layer": "5", "head": "4", "query": "20", **options}  # "query" opens the query-key view
    full = explore(monkeypatch, shelf.FULL_MAPS_TOKENS, **params)
    long = explore(monkeypatch, 16, **params)
    assert not any(LONG_NOTE in c.value for c in full.caption)
    assert any(LONG_NOTE in c.value for c in long.caption)

    drawn, reduced = chart(full, "model_view"), chart(long, "model_view")
    cells_full, cells_long = z_array(drawn["data"][0]).astype(float), z_array(reduced["data"][0]).astype(float)
    assert cells_full.shape == cells_long.shape
    levels = np.abs(np.nan_to_num(cells_full) - np.nan_to_num(cells_long))
    assert levels.max() <= 1 and levels.mean() < 0.01  # percent levels: a weight on a rounding edge may move one
    assert drawn["data"][0]["y"] == reduced["data"][0]["y"]  # the same pooled labels

    head_full, head_long = chart(full, "head_heatmap"), chart(long, "head_heatmap")
    assert head_full["data"][0]["y"] == head_long["data"][0]["y"]
    # float16 maps (the full path keeps) against float16 queries and keys (the reduced one keeps)
    np.testing.assert_allclose(z_array(head_long["data"][0]).astype(float),
                               z_array(head_full["data"][0]).astype(float), atol=3e-3)

    bars_full, bars_long = chart(full, "qk_bars")["data"], chart(long, "qk_bars")["data"]
    assert [b.get("name") for b in bars_full] == [b.get("name") for b in bars_long]
    for a, b in zip(bars_full, bars_long):  # recorded float32 queries and keys against the kept float16 ones
        assert a["x"] == b["x"], a.get("name")  # the same keys shown
        np.testing.assert_allclose(z_array({"z": b["y"]}).astype(float), z_array({"z": a["y"]}).astype(float),
                                   rtol=2e-2, atol=2e-2, err_msg=a.get("name"))

    row_full, row_long = profile_row(full), profile_row(long)
    assert row_full.keys() == row_long.keys()
    for name, value in row_full.items():
        if isinstance(value, float):
            assert abs(row_long[name] - value) <= 2e-3, (name, value, row_long[name])
        else:
            assert row_long[name] == value, name
    model = shelf.model_for(workbench(), SMOLLM)
    assert model.info.max_tokens == 512 and shelf.long_token_limit(model) == 4096  # the full-map pages cut at 512


def test_cancel_stops_the_run_and_it_does_not_start_again_by_itself(monkeypatch):
    require_offline(SMOLLM)
    monkeypatch.setattr(shelf, "FULL_MAPS_TOKENS", 16)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, "text": " ".join([TEXT] * 12)})  # ~420 tokens: a few seconds
    at.run()
    running = workbench().jobs.running()
    assert len(running) == 1
    job = running[0]
    job.cancel()
    finish_jobs(at)
    assert_clean(at)
    assert isinstance(job.error, Cancelled) and (job.total == 0 or job.done < job.total)  # not run to the end
    assert not workbench().jobs.running()
    at.run()
    assert not workbench().jobs.running()  # no start by itself after a cancel
    button = at.button(key="long_trace")
    assert button.label == "Compute the long-text views"
    finish_jobs(button.click().run())
    assert_clean(at)
    assert chart(at, "model_view")["layout"]["meta"]["source_shape"][2] > 400
    assert at.button(key="reduced_npz_prepare").label == "Prepare Reduced views (NPZ)"


def test_the_token_limit_setting():
    assert shelf.max_tokens_setting({}) == (8192 if torch.cuda.is_available() else 4096)
    assert shelf.max_tokens_setting({"ATTNVIZ_MAX_TOKENS": "8000"}) == 8000
    for bad in ("abc", "1", "-5", "4e3", "٤٠٩٦"):
        with pytest.raises(ValueError, match="ATTNVIZ_MAX_TOKENS"):
            shelf.max_tokens_setting({"ATTNVIZ_MAX_TOKENS": bad})


def test_a_link_does_not_carry_a_text_longer_than_it_may(monkeypatch):
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = MINILM
    at.run()
    at.text_input(key="text").set_value("word " * (MAX_TEXT // 5 + 10)).run()
    assert_clean(at)
    assert "text" not in at.query_params
    assert any("longer than a link may carry" in c.value for c in at.caption)


@pytest.mark.slow
def test_a_reduced_run_reserves_its_measured_peak():
    """traces.reduced_bytes against the peak resident memory reduced runs reach (VmHWM over the RSS before each)
    in a warm process, each pass in a thread of its own after a full-map trace in another, as in the app
    (benchmarks/bench_reduced_peak.py: the blocks grow with their rows, and glibc's heap keeps what it cannot
    reuse, so a fresh process's first pass says too little)."""
    require_offline(SMOLLM)
    runs = reduced_peak.measure(ROOT, runs=3, chars=8_000)
    assert all(row["tokens"] > 1000 for row in runs)
    for row in runs:
        assert row["peak_over"] <= row["reserved"], runs
    assert max(row["reserved"] for row in runs) <= 5 * max(row["peak_over"] for row in runs), runs


def test_a_new_long_text_stops_the_run_for_the_last_one(monkeypatch):
    """A visitor holds one heavy-work slot: typing another long text while the last one runs cancels that run
    (no longer wanted) instead of refusing the new one as busy."""
    require_offline(SMOLLM)
    monkeypatch.setattr(shelf, "FULL_MAPS_TOKENS", 16)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, "text": " ".join([TEXT] * 13)})  # a text no other test computes
    at.run()
    first = workbench().jobs.running()
    assert len(first) == 1
    at.text_input(key="text").set_value(TEXT + " And one more sentence.").run()
    assert first[0].finished.is_set() and isinstance(first[0].error, Cancelled)
    finish_jobs(at)
    assert_clean(at)
    assert not any("already" in w.value for w in at.warning)
    assert chart(at, "model_view")["layout"]["meta"]["source_shape"][2] < 100  # the new text's


def test_the_reduced_download_looks_its_trace_up_at_the_click():
    """The button holds the trace's key, not the trace: once the store has let a trace go, a click gets the
    page's "evicted" message (ui.downloads.prepared_download), not a file, and no memory stays pinned by it."""
    assert reduced_npz_of(workbench(), (SMOLLM, "a text no visitor has computed", None)) is None
