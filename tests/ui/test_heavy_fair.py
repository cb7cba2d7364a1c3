"""Fair heavy work on the page (ui/heavy.py, ui/guard.py): a visitor waiting for the heavy-work slot reads
its place in the queue, and a job the shared host's bound stopped (workbench.jobs.TooLong) says why and where
it runs without one, in both languages."""

from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.ui.guard import workbench
from attnviz.ui.strings import LANGUAGES, translate
from tests.helpers.jobs import finish_jobs


def slow_page():
    import time

    import streamlit as st

    from attnviz.ui.heavy import heavy_action

    def work(job):
        for i in range(3000):
            time.sleep(0.01)
            job.progress(i + 1, 3000)
        return "done"

    if heavy_action("fair_slow", "Run", (), work, lambda done, total: f"{done}/{total}", autostart=True) == "done":
        st.write("done")


def start(lang: str) -> AppTest:
    at = AppTest.from_function(slow_page, default_timeout=30)
    at.query_params["lang"] = lang
    return at.run()


def ours(jobs) -> list:
    return [job for job in jobs.running() if "fair_slow" in job.key]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_job_past_the_bound_says_why(lang):
    jobs = workbench().jobs
    before, jobs.limit_s = jobs.limit_s, 0.3  # the process's one Workbench: put back below
    try:
        at = start(lang)
        warned = [w.value for w in at.warning]  # a job stopped within the first run is shown by it (then forgotten)
        for job in ours(jobs):
            assert job.finished.wait(30)
    finally:
        jobs.limit_s = before
    if not warned:
        at.run()  # the poll's rerun: the page draws how it ended
        warned = [w.value for w in at.warning]
    assert not at.exception, [e.value for e in at.exception]
    assert warned == [translate(lang, "heavy_too_long", minutes=0.0)]
    assert not [m for m in at.markdown if m.value == "done"]


def test_the_bound_in_words():
    assert translate("en", "heavy_too_long", minutes=3.0).startswith("Stopped after 3 min: on this shared server")
    assert translate("zh", "heavy_too_long", minutes=3.0).startswith("已在 3 分钟后停止")
    for lang in LANGUAGES:
        assert "python -m attnviz" in translate(lang, "heavy_too_long", minutes=3.0)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_waiting_job_shows_its_place_in_the_queue(lang):
    slots = workbench().slots
    release, held = threading.Event(), threading.Event()

    def other_visitor():
        with slots.hold("another visitor"):
            held.set()
            release.wait(30)

    threading.Thread(target=other_visitor, daemon=True).start()
    assert held.wait(5)
    try:
        at = start(lang)
        [job] = ours(workbench().jobs)
        deadline = time.monotonic() + 5
        while job.ahead is None:  # told at its first waiting step
            assert time.monotonic() < deadline
            time.sleep(0.05)
        at.run()
        bars = [bar.proto.text for bar in at.get("progress")]
        assert bars == [translate(lang, "waiting_slot_next")]
        job.cancel()
    finally:
        release.set()
    finish_jobs(at, timeout=30)


def refused_page():
    import streamlit as st
    import torch

    from attnviz.transformer.config import ModelConfig
    from attnviz.transformer.model import Transformer
    from attnviz.ui.guard import workbench
    from attnviz.ui.heavy import heavy_action

    def work(job):
        config = ModelConfig(family="gpt2", vocab_size=50, d_model=64, n_layers=2, n_heads=16, d_ff=128,
                             causal=True, norm_placement="pre", max_positions=2048)
        with torch.inference_mode(), workbench().reserve(0):  # its maps: 64 MB a layer, spent where allocated
            Transformer(config)(torch.zeros(1, 1024, dtype=torch.long))
        return "done"

    if heavy_action("fair_refused", "Run", (), work, lambda done, total: f"{done}/{total}", autostart=True) == "done":
        st.write("done")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_job_the_memory_ceiling_stops_says_so_with_the_figures(lang):
    """Issue 36, item 8: a job whose attention maps would pass the budget is stopped where they are allocated, and
    the page says so in words with the figures, in either language."""
    ceiling = workbench().ceiling
    # Make now all the room the ceiling could make for the job: what earlier tests in this process left (freed heap
    # glibc keeps resident, models and traces in the stores) would otherwise be let go at the job's check, and
    # the limit below met by that, not by refusing the job.
    for _ in range(100):
        if not ceiling._make_room(1 << 40, None):
            break
    before = ceiling.limit
    ceiling.limit = ceiling.rss() + 30_000_000  # the process's one Workbench: put back below
    try:
        at = AppTest.from_function(refused_page, default_timeout=30)
        at.query_params["lang"] = lang
        at.run()
        shown = [e.value for e in at.error]  # a job done within this run is shown by it (and then forgotten)
        [job] = [job for job in workbench().jobs.running() if "fair_refused" in job.key] or [None]
        if job is not None:
            assert job.finished.wait(30)
    finally:
        ceiling.limit = before
    if not shown:
        at.run()
        shown = [e.value for e in at.error]
    assert not at.exception, [e.value for e in at.exception]
    words = translate(lang, "trace_over_budget", need=0.0, budget=0.0, used=0.0)
    [error] = shown
    # one layer's scores, their masked sum and probabilities, 16 x 1,024^2 floats each
    assert error.startswith(words.split("0.00")[0]) and "0.20 GB" in error
    assert not [m for m in at.markdown if m.value == "done"]
