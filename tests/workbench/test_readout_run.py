"""The Explore page's logit lens, attribution and routes share one recorded forward pass of the text
(workbench.readout): one Enter pays for one pass, another position reads the same pass, and every result
equals what the view computes from its own pass (tests/interventions check those against HF's models)."""

from __future__ import annotations

import pytest

from attnviz.readouts import attribution, logit_lens, recorded_run, routes
from attnviz.workbench import readout as work
from attnviz.workbench.shared import Workbench
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TEXT = "The keys to the cabinet are on the table"


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf.tiny_decoder("llama", bpe_tokenizer(True), seed=4, intermediate_size=37)[0]


def test_the_three_views_read_one_recorded_pass(tiny, monkeypatch):
    monkeypatch.setattr(work, "model_for", lambda bench, name: tiny)
    passes = []
    record = recorded_run.recorded_run

    def counted(*args, **kwargs):
        passes.append(args[1])
        return record(*args, **kwargs)

    monkeypatch.setattr(recorded_run, "recorded_run", counted)
    bench = Workbench(budget=8 * 2**30)
    last = work.default_position(bench, "tiny", TEXT)
    for position in (last, 3):  # another position of the same text reads the same pass
        lens = work.logit_lens(bench, "tiny", TEXT, position, None)
        split = work.attribution(bench, "tiny", TEXT, position, " on", " the")
        graph = work.routes(bench, "tiny", TEXT, position, 0.04)
        assert passes == [TEXT]
        monkeypatch.setattr(recorded_run, "recorded_run", record)  # each view's own pass, as the notebook API runs it
        assert lens.to_json() == logit_lens.logit_lens(tiny, TEXT, position).to_json()
        assert split.to_json() == attribution.attribute(tiny, TEXT, " on", " the", position).to_json()
        assert graph.to_json() == routes.routes(tiny, TEXT, position, 0.04).to_json()
        assert lens.position == split.position == graph.position == position
        monkeypatch.setattr(recorded_run, "recorded_run", counted)
    held = bench.views.get(work.run_key("tiny", TEXT))
    assert held is not None and held.nbytes > 0


def test_a_run_too_large_for_the_views_store_is_used_and_not_kept(tiny, monkeypatch):
    monkeypatch.setattr(work, "model_for", lambda bench, name: tiny)
    bench = Workbench(budget=8 * 2**30)
    bench.views.capacity = 10_000  # smaller than any recorded pass, larger than a lens of 10 tokens
    lens = work.logit_lens(bench, "tiny", TEXT, 4, None)
    assert lens.position == 4 and bench.views.get(work.run_key("tiny", TEXT)) is None
