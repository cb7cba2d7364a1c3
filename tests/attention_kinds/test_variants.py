"""attnviz/interventions/variants.py (MHA/GQA/MQA measured) and attnviz/interventions/gqa_conversion.py (MHA -> GQA
by mean-pooling), checked against formulas worked by hand and direct computations with the original weights."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attnviz.attention_kinds.gqa_conversion import conversion_distances, group_choices, mean_pool_kv, pool_heads
from attnviz.attention_kinds.variants import (
    NAMED_MODELS,
    UNPUBLISHED,
    build_stacks,
    compare,
    format_table,
    kv_heads_of,
    peak_bytes,
)
from attnviz.loading import build_module
from tests.conftest import ROOT
from tests.helpers.tiny_hf import DECODERS, ENCODERS, VOCAB, hf_model


def attention_parameters(c: int, h: int, k: int) -> int:
    """By hand: Q and O are C x C (+ C bias); K and V are C x (K * D) (+ K * D bias), D = C / H."""
    d = c // h
    return 2 * (c * c + c) + 2 * (c * k * d + k * d)


def test_compare_measures_the_cache_the_formula_predicts():
    result = compare(d_model=64, n_heads=8, n_groups=2, n_layers=3, n_tokens=20, lengths=(8, 32), repeats=3)
    rows = {row.name: row for row in result.rows}
    assert list(rows) == ["MHA", "GQA", "MQA"]
    assert [rows[n].n_kv_heads for n in rows] == [8, 2, 1]
    for row in rows.values():
        assert row.parameters == 3 * attention_parameters(64, 8, row.n_kv_heads)
        # 3 layers x (keys + values) x 20 tokens x K heads x 8 dims, float32
        assert row.cache_elements == 3 * 2 * 20 * row.n_kv_heads * 8
        assert row.cache_bytes == row.cache_elements * 4 == row.formula_bytes
        assert set(row.ms_per_token) == {8, 32} and all(v > 0 for v in row.ms_per_token.values())
    assert rows["GQA"].measured_ratio == 2 / 8 == rows["GQA"].formula_ratio
    assert rows["MQA"].measured_ratio == 1 / 8 == rows["MQA"].formula_ratio
    assert rows["MHA"].measured_ratio == 1.0
    assert "MQA" in format_table(result) and "ms@32" in format_table(result)


def test_compare_in_bfloat16_halves_the_bytes():
    result = compare(d_model=32, n_heads=4, n_groups=2, n_layers=1, n_tokens=5, lengths=(4,), repeats=1,
                     dtype=torch.bfloat16)
    assert [row.cache_bytes for row in result.rows] == [2 * 5 * 4 * 8 * 2, 2 * 5 * 2 * 8 * 2, 2 * 5 * 1 * 8 * 2]


def test_stacks_decode_like_a_full_causal_pass():
    """The measured stacks are real attention: token-by-token decoding equals one causal pass."""
    from attnviz.attention_kinds.variants import decode
    from attnviz.transformer.kv_cache import KVCache

    stacks = build_stacks(32, 4, 2, 2)
    x = torch.randn(1, 9, 32)
    with torch.no_grad():
        for stack in stacks.values():
            full = stack(x, KVCache(2), causal=True)
            cache = decode(stack, x)
            step = stack(torch.zeros(1, 1, 32), cache)  # one more token after the nine
            again = stack(torch.cat((x, torch.zeros(1, 1, 32)), 1), KVCache(2), causal=True)
            assert (step[0, 0] - again[0, -1]).abs().max() <= 1e-5
            assert (again[0, :9] - full[0]).abs().max() <= 1e-5


def test_prefill_fills_every_layer_to_the_length():
    from attnviz.attention_kinds.variants import prefill

    stacks = build_stacks(32, 4, 2, 3)
    with torch.no_grad():
        cache = prefill(stacks["GQA"], torch.randn(1, 7, 32))
    assert [layer.keys.shape for layer in cache.layers] == [(1, 2, 7, 8)] * 3 and cache.length == 7


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="divide"):
        kv_heads_of(8, 3)
    with pytest.raises(ValueError, match="divisible"):
        build_stacks(100, 8, 2, 1)
    assert peak_bytes(512, 8, 6, 256, (64, 256)) > 3 * 6 * 4 * 512 * 512 * 4


def test_named_models():
    assert any("Transformer" in m for m, _, _ in NAMED_MODELS["MHA"])
    assert all(k == "1" for _, _, k in NAMED_MODELS["MQA"]) and {m.split()[0] for m, _, _ in NAMED_MODELS["MQA"]} == {
        "PaLM", "Falcon-7B"}
    assert {"Llama 2 70B", "Mistral 7B", "SmolLM2-135M"} <= {m for m, _, _ in NAMED_MODELS["GQA"]}
    assert all(q == k for _, q, k in NAMED_MODELS["MHA"]) and all(q != k for _, q, k in NAMED_MODELS["GQA"])
    assert not any("Gemini" in m for rows in NAMED_MODELS.values() for m, _, _ in rows)
    assert "not published" in UNPUBLISHED


def test_benchmark_script_prints_the_table():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_kv_variants.py"), "--d-model", "32",
                          "--heads", "4", "--groups", "2", "--layers", "1", "--tokens", "8", "--lengths", "4,8",
                          "--repeats", "2"], capture_output=True, text=True, timeout=300, check=True)
    assert "GQA" in out.stdout and "ms@8" in out.stdout and "0.5000" in out.stdout


# ---------------------------------------------------------------------------------------------------
# MHA -> GQA


def test_pooled_keys_are_the_mean_of_the_heads_keys():
    """By linearity, a pooled head's keys are the mean of its group's original keys: checked on the
    projections' outputs, computed with the original layer."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 8 * 4)  # 8 heads of 4 dims
    x = torch.randn(5, 16)
    pooled = pool_heads(linear, 8, 2, 4)
    heads = linear(x).view(5, 8, 4)
    by_hand = torch.stack([heads[:, 0:4].mean(1), heads[:, 4:8].mean(1)], dim=1)  # groups of 4 heads
    assert torch.allclose(pooled(x).view(5, 2, 4), by_hand, atol=1e-6)


def test_conversion_copies_and_never_mutates_the_original():
    hf = hf_model(DECODERS["llama-mha"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    converted = mean_pool_kv(ours, 2)
    assert converted.config.n_kv_heads == 2 and ours.config.kv_heads == 4
    assert converted.blocks[0].attn.k_proj.weight.shape == (2 * 8, 32)
    assert ours.blocks[0].attn.k_proj.weight.shape == (4 * 8, 32)
    assert all(torch.equal(before[k], v) for k, v in ours.state_dict().items())
    # unchanged weights are shared, not copied
    assert converted.blocks[0].attn.q_proj.weight is ours.blocks[0].attn.q_proj.weight
    assert converted.kv_group == [0, 0, 1, 1]


@pytest.mark.parametrize("factory", [ENCODERS["bert"], DECODERS["llama-mha"], DECODERS["gpt2"]])
def test_all_groups_is_bit_identical(factory):
    hf = hf_model(factory)
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, VOCAB, (1, 11), generator=torch.Generator().manual_seed(0))
    result = conversion_distances(ours, ids, n_groups=4)
    assert result.js_mean.tolist() == [0.0, 0.0] and result.max_abs.tolist() == [0.0, 0.0]
    assert result.hidden_relative_l2 == 0.0
    with torch.no_grad():
        assert torch.equal(mean_pool_kv(ours, 4)(ids).hidden, ours(ids).hidden)
    moved = conversion_distances(ours, ids, n_groups=1)
    assert (moved.js_mean > 0).all() and moved.hidden_relative_l2 > 0


def test_conversion_matches_a_gqa_model_built_from_pooled_weights():
    """Independent route: pool the HF checkpoint's k/v tensors by hand, load them into a GQA model
    of the same family through the loader, and compare with the converted module."""
    hf = hf_model(DECODERS["llama-mha"])
    config = hf.config.to_dict()
    state = {k: v.clone() for k, v in hf.state_dict().items()}
    for key in list(state):
        if key.endswith(("k_proj.weight", "v_proj.weight")):
            state[key] = state[key].view(2, 2, 8, 32).mean(1).reshape(16, 32)
    gqa = build_module({**config, "num_key_value_heads": 2}, state).eval()
    converted = mean_pool_kv(build_module(config, hf.state_dict()).eval(), 2)
    ids = torch.randint(3, VOCAB, (1, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (gqa(ids).attentions - converted(ids).attentions).abs().max() <= 1e-6


def test_group_choices():
    assert group_choices(12) == [12, 6, 4, 3, 2, 1]
    with pytest.raises(ValueError, match="divide"):
        mean_pool_kv(build_module(DECODERS["llama-mha"]().config.to_dict(),
                                  DECODERS["llama-mha"]().state_dict()), 3)


def test_minilm_moves_more_with_fewer_groups(minilm):
    """MiniLM (12 heads): g = 12 changes nothing; pooling all heads into one (MQA) moves the model
    more than keeping 6 groups, measured on one sentence."""
    enc = minilm.encode("The keys to the cabinet are on the table.")
    results = {g: conversion_distances(minilm.module, enc.ids, g, enc.type_ids) for g in (12, 6, 1)}
    assert results[12].hidden_relative_l2 == 0.0 and (results[12].js_mean == 0).all()
    assert results[1].hidden_relative_l2 > results[6].hidden_relative_l2 > 0
    assert results[1].js_mean.mean() > results[6].js_mean.mean() > 0
    assert ((results[1].js_mean >= 0) & (results[1].js_mean <= 1)).all()
