"""Per-layer attention kinds: the names the mosaic's strip shows, and the query-key view reproducing a
head's row when the score has extra terms (ALiBi), a soft-cap, a sliding window and a learned sink."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnviz import plots
from attnviz.analysis.profile import has_learned_sinks, profile_heads
from attnviz.analysis.query_key import query_key
from attnviz.loading.random_model import random_model
from attnviz.transformer.config import ModelConfig

TEXT = "the cat sat on the mat and then it slept"

BASE = ModelConfig(family="test", vocab_size=300, d_model=32, n_layers=2, n_heads=4, d_ff=40, causal=True,
                   norm_placement="pre", norm_eps=1e-5, max_positions=64, lm_head=True)


def test_layer_kinds_name_what_differs():
    gemma_like = dataclasses.replace(BASE, rope_theta=1e4, max_positions=None, layer_windows=(8, None),
                                     attn_softcap=50.0)
    assert [gemma_like.layer_kind(i) for i in range(2)] == ["sliding 8, soft-capped", "full, soft-capped"]
    nope = dataclasses.replace(BASE, rope_theta=1e4, max_positions=None, nope_layers=(1,))
    assert [nope.layer_kind(i) for i in range(2)] == ["full", "full, NoPE"]
    bloom = dataclasses.replace(BASE, alibi=True, max_positions=None)
    assert bloom.layer_kind(0) == "full, ALiBi"
    sinks = dataclasses.replace(BASE, attn_sinks=True, sliding_window=4)
    assert sinks.layer_kind(0) == "sliding 4, sinks"
    encoder = dataclasses.replace(BASE, causal=False, layer_windows=(16, None))
    assert encoder.layer_kind(0) == "local 16"


def test_the_mosaic_labels_each_layer_and_draws_a_strip_only_when_layers_differ():
    attentions = np.full((2, 4, 5, 5), 0.2)
    fig = plots.model_view(attentions, layer_kinds=["sliding 8", "full"])
    assert list(fig.layout.yaxis.ticktext[:2]) == ["L0 · sliding 8", "L1 · full"]
    strips = [s for s in fig.layout.shapes if (s.name or "").startswith("kind ")]
    assert [s.name for s in strips] == ["kind L0: sliding 8", "kind L1: full"]
    assert strips[0].fillcolor != strips[1].fillcolor
    plain = plots.model_view(attentions, layer_kinds=["full", "full"])
    assert list(plain.layout.yaxis.ticktext[:2]) == ["L0", "L1"]
    assert not [s for s in plain.layout.shapes if (s.name or "").startswith("kind ")]


@pytest.fixture(scope="module")
def unusual_model():
    """Every extra at once, with weights drawn so each one bites: ALiBi, a cap, a 3-key window in
    layer 0, sinks of +2 (a large share of each row); a cap of 0.1 is far from linear on these scores."""
    config = dataclasses.replace(BASE, alibi=True, attn_softcap=0.1, attn_sinks=True, layer_windows=(3, None))
    model = random_model(config, seed=3)
    with torch.no_grad():
        for block in model.module.blocks:
            block.attn.sinks.fill_(2.0)
    return model


def test_the_query_key_view_reproduces_rows_with_alibi_cap_window_and_sinks(unusual_model):
    model = unusual_model
    trace = model.run(TEXT)
    worst = 0.0
    for layer in range(2):
        recorded = model.record(TEXT, names=("queries", "keys"), layer=layer)
        for head in range(4):
            setup = model.score_setup(layer, head)
            for position in range(len(trace.tokens)):
                view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, head, position, **setup)
                row = trace.attentions[layer, head, position].astype(np.float64)
                worst = max(worst, float(np.abs(view.probabilities - row).max()))
                assert view.capped
                assert view.sink_share == pytest.approx(1 - row.sum(), abs=1e-5)
                if layer == 0:
                    assert view.visible.sum() == min(3, position + 1)
    assert worst <= 1e-5
    # Leaving any extra out breaks the row: the test can fail.
    recorded = model.record(TEXT, names=("queries", "keys"), layer=1)
    row = trace.attentions[1, 2, 6].astype(np.float64)
    setup = model.score_setup(1, 2)
    for missing in ("slope", "softcap", "sink"):
        view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, 2, 6, **(setup | {missing: None}))
        assert np.abs(view.probabilities - row).max() > 1e-3, missing


def test_learned_sink_mass_is_what_rows_miss(unusual_model):
    trace = unusual_model.run(TEXT)
    assert has_learned_sinks(trace)
    profile = profile_heads(trace)
    expected = 1 - trace.attentions.astype(np.float64).sum(-1).mean(-1)
    assert np.allclose(profile.sink_mass, expected, atol=1e-6)
    assert profile.sink_mass.min() > 0.05  # sinks of +2 take a visible share


def test_the_learn_table_reads_each_family_from_its_config():
    """transformers' default gpt-oss config alternates 128-token sliding layers with full ones, all with sinks."""
    from attnviz.loading.kinds import all_family_kinds

    rows = {row.model_type: row for row in all_family_kinds()}
    assert rows["gpt_oss"].layers == (("sliding 128, sinks", 18), ("full, sinks", 18))
    assert ("rope_scaling", {"kind": "yarn"}) in rows["gpt_oss"].extras
    assert rows["mistral"].layers == (("sliding 4096", 32),)
    assert rows["bert"].layers == (("full", 12),) and rows["bert"].extras == ()
    assert "marian" not in rows  # translation models have their own page
