"""Activation patching that reuses the receiving run's prefix (patching.prepare's reuse_prefix: each patched run
computed from the first position it patches on) against the same patches computed whole (reuse_prefix=False,
itself checked against hooks on Hugging Face's modules in test_patching.py): every per-position grid (the
residual stream, heads x positions, MLPs x positions) and the whole-position ones, both directions, on tiny
random decoders of the families whose attention differs (GQA, sliding windows, soft-caps, q/k norms, ALiBi,
MLA, sinks, NoPE layers, partial rotary, parallel blocks, experts), on a pair of one length, a pair of two
lengths (positions without a partner stay NaN) and a pair scored before its last position; and on SmolLM2."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnviz.interventions import attribution_patching as ap
from attnviz.interventions import patching
from attnviz.interventions.ablation import ScanStopped
from attnviz.loading import build_module
from tests.helpers import tiny_hf

TOL = 1e-5  # in logit-difference units
PER_POSITION = ("residual", "head_positions", "mlp_positions")
WHOLE_POSITIONS = ("heads", "mlps")  # every position patched: they start at position 0, rows still join by layer
# GPT-2 (learned positions), Llama (GQA), Mistral (a sliding window), Gemma 2 (soft-caps, sandwich norms), Gemma 3
# (sliding and full layers, q/k norms), OLMo 2 (norms after, q/k norm over the projection), SmolLM3 (NoPE layers),
# GPT-NeoX (parallel blocks, partial rotary), OPT (positions counted from the mask), BLOOM (ALiBi), gpt-oss (sinks,
# YaRN, experts), DeepSeek-V3 (MLA, whose cached form is the absorbed one, group-routed experts).
FAMILIES = ["gpt2", "llama", "mistral", "gemma2", "gemma3_text", "olmo2", "smollm3", "gpt_neox", "opt", "bloom",
            "gpt_oss", "deepseek_v3"]

CLEAN = (1, 17, 40, 23, 8, 51, 12, 33, 9, 60)
SAME_LENGTH = patching.PatchPair(CLEAN, CLEAN[:3] + (77,) + CLEAN[4:], 9, 9, 5, 9,
                                 tuple((i, i) for i in range(10)))
# The corrupted run has two tokens where the clean run has one (position 3): those stay unpatched.
LONGER = CLEAN[:3] + (77, 78) + CLEAN[4:]
TWO_LENGTHS = patching.PatchPair(CLEAN, LONGER, 9, 10, 5, 9,
                                 tuple((i, i) for i in range(3)) + tuple((i, i + 1) for i in range(4, 10)))
# Scored at position 6 of 10: a patch at 7, 8 or 9 cannot reach it.
SCORED_EARLY = dataclasses.replace(SAME_LENGTH, clean_position=6, corrupt_position=6)
PAIRS = {"same length": SAME_LENGTH, "two lengths": TWO_LENGTHS, "scored early": SCORED_EARLY}


@pytest.fixture(scope="module", params=FAMILIES)
def module(request):
    return tiny_hf.tiny(request.param)


def grids_both_ways(module, pair, direction, grids):
    """{grid: (computed whole, reusing the prefix)}, and the logit difference between the clean and corrupted
    runs (the unit the comparison is made in)."""
    whole = patching.prepare(module, pair, direction, reuse_prefix=False)
    reused = patching.prepare(module, pair, direction)
    assert whole.prefix is None and reused.prefix is not None
    # batches of 16: several per grid, each with rows of several positions and layers
    out = {grid: (ap.exact_grid(whole, grid, batch_size=16), ap.exact_grid(reused, grid, batch_size=16))
           for grid in grids}
    return out, abs(whole.clean_value - whole.corrupt_value)


@pytest.mark.parametrize("pair_name", list(PAIRS))
@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_reusing_the_prefix_equals_the_whole_run(module, pair_name, direction):
    pair = PAIRS[pair_name]
    grids, scale = grids_both_ways(module, pair, direction,
                                   PER_POSITION + (WHOLE_POSITIONS if pair_name == "same length" else ()))
    for grid, (whole, reused) in grids.items():
        assert np.array_equal(np.isnan(whole), np.isnan(reused)), grid
        assert np.nanmax(np.abs(whole - reused)) * scale <= TOL, grid
        assert np.nanmax(whole) - np.nanmin(whole) > 1e-3, grid  # patches differ in effect: not an empty check
    receiving = 0.0 if direction == "denoise" else 1.0  # the receiving run's value, normalised
    if pair_name == "two lengths":
        unpaired = [3, 4] if direction == "denoise" else [3]
        for grid in ("residual", "head_positions", "mlp_positions"):
            reused = grids[grid][1]
            assert np.isnan(reused[..., unpaired]).all() and not np.isnan(np.delete(reused, unpaired, -1)).any()
    if pair_name == "scored early":
        for grid in ("residual", "head_positions", "mlp_positions"):
            assert np.all(grids[grid][1][..., 7:] == receiving)
    # Position 3 is the first that differs: a patch before it puts in what is there (both runs share tokens 0-2).
    assert np.all(grids["residual"][1][:, :3] == receiving)
    assert np.abs(grids["residual"][0][:, :3] - receiving).max() * scale <= TOL


def test_runs_start_at_the_first_patched_position_and_read_the_cached_prefix(monkeypatch):
    module = tiny_hf.tiny("llama")
    runs = patching.prepare(module, SAME_LENGTH)
    starts = []
    original = patching._Runs.run_suffix

    def spy(self, start, joins, edits):
        starts.append((start, tuple(joins)))
        return original(self, start, joins, edits)
    monkeypatch.setattr(patching._Runs, "run_suffix", spy)
    reference = patching.residual(runs, batch_size=4)
    # rows by position, then layer: positions 3 to 9 (0 to 2 are the shared prefix), 3 layers each, 4 to a batch
    # (3.0 3.1 3.2 4.0 | 4.1 4.2 5.0 5.1 | 5.2 6.0 ...), each batch from its lowest position, rows joining by layer
    assert starts == [(3, (0, 0, 1, 2)), (4, (0, 1, 1, 2)), (5, (0, 1, 2, 2)), (7, (0, 0, 1, 2)),
                      (8, (0, 1, 1, 2)), (9, (2,))]
    # keys and values other than the receiving run's before the patched position change the result
    broken = dataclasses.replace(runs, prefix=[(keys * 0, values * 0) for keys, values in runs.prefix])
    assert np.nanmax(np.abs(patching.residual(broken, batch_size=4) - reference)) > 1e-3


def test_progress_and_stop_when_reusing_the_prefix():
    module = tiny_hf.tiny("gemma2")
    runs = patching.prepare(module, SCORED_EARLY)
    calls = []
    heat = patching.residual(runs, progress=lambda done, total: calls.append((done, total)), batch_size=5)
    total = heat.size
    # the shared prefix (3 positions) and the positions after the scored one (3) count as done at once
    assert calls[0] == (6 * module.config.n_layers, total) and calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    with pytest.raises(ScanStopped):
        patching.residual(runs, should_stop=lambda: True)


def test_encoders_compute_every_patched_run_whole():
    hf = tiny_hf.hf_model(tiny_hf.ENCODERS["bert"])
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    assert not patching.prefix_reusable(module) and patching.prefix_reusable(tiny_hf.tiny("llama"))
    pair = patching.PatchPair(CLEAN, SAME_LENGTH.corrupt_ids, 9, 9, None, None, SAME_LENGTH.pairs, "embedding")
    assert patching.prepare(module, pair).prefix is None


# --- SmolLM2 offline -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm_reusing_the_prefix_equals_the_whole_run(smollm):
    pair = patching.patch_pair(smollm, "The keys to the cabinet", "The key to the cabinet", " are", " is")
    cells = [(layer, head, t) for layer in (0, 29) for head in range(smollm.config.n_heads)
             for t in range(len(pair.pairs))]
    for direction in patching.DIRECTIONS:
        whole = patching.prepare(smollm.module, pair, direction, reuse_prefix=False)
        reused = patching.prepare(smollm.module, pair, direction)
        # normalised: SmolLM2's logits are large enough that the whole path differs from itself by 2e-5 in
        # logit-difference units between two batch sizes (float32 rounding), 3e-6 normalised
        residual = patching.residual(whole), patching.residual(reused)
        assert np.nanmax(np.abs(residual[0] - residual[1])) <= TOL
        assert np.nanmax(np.abs(residual[0])) > 0.5  # the residual at the token that differs carries it
        heads_positions = [ap.exact_cells(runs, "head_positions", cells) for runs in (whole, reused)]
        assert np.abs(heads_positions[0] - heads_positions[1]).max() <= TOL


def test_prepare_keeps_the_cached_prefix_under_the_ceiling(monkeypatch):
    """The receiving run's keys and values are drawn from the memory ceiling as they are kept."""
    module = tiny_hf.tiny("llama")
    spent = []
    original = patching.kept

    def counting(nbytes, what, make):
        spent.append((what, nbytes))
        return original(nbytes, what, make)
    monkeypatch.setattr(patching, "kept", counting)
    runs = patching.prepare(module, SAME_LENGTH)
    cached = sum(keys.nbytes + values.nbytes for keys, values in runs.prefix)
    assert cached == sum(n for what, n in spent if what == "the receiving run's keys and values")
    c = module.config
    assert cached == c.n_layers * 2 * c.kv_heads * len(CLEAN) * c.dim_per_head * 4  # [1, K, T, D] float32, twice

