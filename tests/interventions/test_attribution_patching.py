"""attnviz.interventions.attribution_patching against references written here: the gradient terms (a_src - a_recv)
. dm/da computed by Hugging Face's own autograd, with hooks on HF's modules that add a zero leaf to the output
projection's input, the MLP's output and the decoder layer's input (tiny random GPT-2, Llama GQA, Gemma 3); the
estimate as the derivative of exact patching (a central difference of `patching.scan` with the source scaled
towards the receiving run); the metric through two rows of the head against the full logits (Gemma 2's final
soft-cap included); SmolLM2 offline against exact patching; and `patch --attribution` on the command line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import attnviz
from attnviz.cli.main import main
from attnviz.interventions import attribution_patching as ap
from attnviz.interventions import patching
from attnviz.loading import build_module
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.transformer.record import Recorder
from tests.helpers import tiny_hf
from tests.helpers.hf_hooks import first_input, hf_layers, with_first_input
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TOL = 1e-4  # logit-difference units, as tests/interventions/test_patching.py
GRAD_TOL = 1e-6  # the gradient terms against HF's autograd: both float32 passes, measured within 1e-7


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request):
    bos = request.param == "llama"
    return tiny_hf.tiny_decoder(request.param, bpe_tokenizer(bos), seed=3, intermediate_size=37,
                                max_position_embeddings=128)


def gemma3():
    hf = tiny_hf.tiny_hf_model("gemma3_text")
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    clean = [1, 17, 40, 23, 8, 51, 12, 33]
    corrupt = clean[:2] + [77] + clean[3:]
    return module, hf, patching.PatchPair(tuple(clean), tuple(corrupt), 7, 7, 5, 9, tuple((i, i) for i in range(8)))


# --- the reference: HF's autograd through hooks on its modules ----------------------------------------------------


def hf_run(hf, ids, position, target, contrast, zeros: bool):
    """One HF run: (its logit difference, {(point, layer): the activation [T, width]}, {(point, layer): the zero
    leaf added to it} when `zeros`). Points: "heads" the output projection's input, "mlp" the MLP's output,
    "resid" the decoder layer's input."""
    seen, leaves, handles = {}, {}, []

    def added(key, x):
        seen[key] = x[0].detach().clone()
        if not zeros:
            return x
        leaves[key] = torch.zeros_like(x, requires_grad=True)
        return x + leaves[key]

    for layer, (block, proj, mlp) in enumerate(hf_layers(hf)):
        handles.append(proj.register_forward_pre_hook(
            lambda m, a, k, layer=layer: with_first_input(a, k, added(("heads", layer), first_input(a, k))),
            with_kwargs=True))
        handles.append(block.register_forward_pre_hook(
            lambda m, a, k, layer=layer: with_first_input(a, k, added(("resid", layer), first_input(a, k))),
            with_kwargs=True))
        handles.append(mlp.register_forward_hook(lambda m, a, out, layer=layer: added(("mlp", layer), out)))
    try:
        with torch.enable_grad():
            logits = hf(input_ids=torch.tensor([ids])).logits[0, position].double()
            value = logits[target] - logits[contrast]
    finally:
        for handle in handles:
            handle.remove()
    return value, seen, leaves


def hf_attribution(hf, pair: patching.PatchPair, direction: str, n_heads: int) -> dict:
    """Every grid's raw terms (a_src - a_recv) . dm/da in logit-difference units, per position, by HF's autograd:
    heads [L, H, T], mlps [L, T], residual [L, T]; positions without a partner NaN."""
    denoise = direction == "denoise"
    ids, position = (pair.corrupt_ids, pair.corrupt_position) if denoise else (pair.clean_ids, pair.clean_position)
    src_ids, src_position = (pair.clean_ids, pair.clean_position) if denoise else (pair.corrupt_ids,
                                                                                   pair.corrupt_position)
    partner = {dst: src for src, dst in (pair.pairs if denoise else [(b, a) for a, b in pair.pairs])}
    with torch.no_grad():
        _, source, _ = hf_run(hf, src_ids, src_position, pair.target_id, pair.contrast_id, zeros=False)
    value, receiving, leaves = hf_run(hf, ids, position, pair.target_id, pair.contrast_id, zeros=True)
    keys = sorted(leaves)
    grads = dict(zip(keys, torch.autograd.grad(value, [leaves[k] for k in keys])))
    n_layers, t = len(hf_layers(hf)), len(ids)
    out = {"heads": np.full((n_layers, n_heads, t), np.nan), "mlp": np.full((n_layers, t), np.nan),
           "resid": np.full((n_layers, t), np.nan)}
    for (point, layer), grad in grads.items():
        for p, s in partner.items():
            term = (source[(point, layer)][s].double() - receiving[(point, layer)][p].double()) * grad[0, p].double()
            if point == "heads":
                out[point][layer, :, p] = term.view(n_heads, -1).sum(-1).numpy()
            else:
                out[point][layer, p] = float(term.sum())
    return {"value": float(value.detach()), **out}


def raw(estimate: ap.Attribution, grid: np.ndarray) -> np.ndarray:
    """An estimate back in logit-difference units: the estimated change of the metric."""
    return grid * (estimate.clean_value - estimate.corrupt_value) + estimate.corrupt_value - estimate.value


def assert_matches_hf(module, hf, pair, direction):
    runs = patching.prepare(module, pair, direction)
    estimate = ap.estimate(runs)
    reference = hf_attribution(hf, pair, direction, module.config.n_heads)
    assert estimate.value == pytest.approx(reference["value"], abs=TOL)
    per_position = {"head_positions": reference["heads"], "mlp_positions": reference["mlp"],
                    "residual": reference["resid"]}
    summed = {"heads": np.nansum(reference["heads"], -1), "mlps": np.nansum(reference["mlp"], -1)}
    for grid, expected in {**per_position, **summed}.items():
        ours = raw(estimate, estimate.grid(grid))
        assert np.array_equal(np.isnan(ours), np.isnan(expected)), grid
        assert np.nanmax(np.abs(ours - expected)) <= GRAD_TOL, (direction, grid, np.nanmax(np.abs(ours - expected)))
    assert np.abs(reference["heads"][np.isfinite(reference["heads"])]).max() > 1e-2  # the test bites
    return runs, estimate


# --- tiny models: the gradient terms through HF ----------------------------------------------------------------


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_estimate_equals_hf_autograd_for_a_pair_of_different_lengths(decoder, direction):
    """'keys' is one token of this vocabulary and 'key' two: the span stays unpatched (NaN per position)."""
    model, hf = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " the")
    assert len(pair.corrupt_ids) == len(pair.clean_ids) + 1
    assert_matches_hf(model.module, hf, pair, direction)


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_gemma3_estimate_equals_hf_autograd(direction):
    module, hf, pair = gemma3()
    assert_matches_hf(module, hf, pair, direction)


def test_estimate_runs_under_inference_mode_as_well(decoder):
    """The app and the CLI may call it inside torch.inference_mode: the gradient pass leaves it."""
    model, _ = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The cat to the cabinet", " are", " the")
    runs = patching.prepare(model.module, pair)
    with torch.inference_mode():
        inside = ap.estimate(runs)
    outside = ap.estimate(runs)
    assert np.array_equal(inside.heads, outside.heads) and np.array_equal(inside.residual, outside.residual)


# --- the estimate is the derivative of exact patching ----------------------------------------------------------


@torch.inference_mode()
def receiving_activations(module, runs) -> dict:
    out = module(runs.ids, record=Recorder(*patching.POINTS), with_logits=False)
    return {name: out.record.stacked(name)[:, 0] for name in patching.POINTS}


def scaled(runs, receiving, alpha: float):
    """The runs with each source moved to receiving + alpha (source - receiving)."""
    sources = {n: receiving[n] + alpha * (runs.sources[n] - receiving[n]) for n in patching.POINTS}
    return dataclasses.replace(runs, sources=sources)


def exact_change(runs, components) -> np.ndarray:
    """Exact patching of `components` as changes of the metric from the receiving run."""
    values = patching.scan(runs, components, None, None, None)
    return values * (runs.clean_value - runs.corrupt_value) + runs.corrupt_value


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_estimate_is_the_derivative_of_exact_patching(decoder, direction):
    """d/d alpha of exact patching with the source at receiving + alpha (source - receiving), at alpha = 0, is
    (a_src - a_recv) . dm/da exactly: a central difference of `patching.scan` (our inference-mode path, no
    autograd) with alpha = +-1e-2 agrees to its O(alpha^2) error (measured 1e-5 in logit-difference units, the
    slopes up to 0.09)."""
    model, _ = decoder
    module = model.module
    pair = patching.patch_pair(model, "The keys to the cabinet", "The cat to the cabinet", " are", " the")
    runs = patching.prepare(module, pair, direction)
    estimate = ap.estimate(runs)
    receiving = receiving_activations(module, runs)
    aligned = [int(p) for p in np.flatnonzero(runs.aligned)]
    grids = {"heads": [(la, h) for la in range(2) for h in range(4)], "mlps": [(la,) for la in range(2)],
             "residual": [(la, p) for la in range(2) for p in aligned], "head_positions": [(1, 2, p) for p in aligned]}
    alpha = 1e-2
    for grid, cells in grids.items():
        components = [ap.component(grid, cell) for cell in cells]
        slope = (exact_change(scaled(runs, receiving, alpha), components)
                 - exact_change(scaled(runs, receiving, -alpha), components)) / (2 * alpha)
        ours = raw(estimate, np.array([estimate.grid(grid)[cell] for cell in cells]))
        assert np.abs(ours - slope).max() <= 1e-4, (grid, ours, slope)
        assert np.abs(slope).max() > 1e-3  # the test bites: 100 times the error measured


def test_where_exact_patching_is_zero_so_is_the_estimate(decoder):
    """The last layer's head outputs and MLP output at a position other than the scored one reach nothing that is
    scored: exact patching and the estimate are both 0 there (an identity, not an approximation)."""
    model, _ = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The cat to the cabinet", " are", " the")
    runs = patching.prepare(model.module, pair)
    estimate = ap.estimate(runs)
    last, before = model.config.n_layers - 1, [p for p in np.flatnonzero(runs.aligned) if p != runs.position]
    for grid, cells in (("head_positions", [(last, h, p) for h in range(4) for p in before]),
                        ("mlp_positions", [(last, p) for p in before])):
        scale = runs.clean_value - runs.corrupt_value  # compared in logit-difference units
        assert np.abs(ap.exact_cells(runs, grid, cells) * scale).max() <= 1e-6  # batch rounding only
        assert np.abs(raw(estimate, np.array([estimate.grid(grid)[cell] for cell in cells]))).max() <= 1e-9


def test_the_embedding_metric_and_its_maximum():
    """A sentence-embedding encoder (no head): the cosine with the clean run. Denoising, the estimate is the
    cosine's derivative (central difference as above); noising, the receiving run is the clean run itself, at
    the cosine's maximum: every estimate reads 1 and the notes say why."""
    hf = tiny_hf.hf_model(tiny_hf.ENCODERS["bert"])
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    clean = (2, 17, 40, 23, 8, 51, 3)
    pair = patching.PatchPair(clean, clean[:2] + (77,) + clean[3:], 0, 0, None, None,
                              tuple((i, i) for i in range(7)), metric="embedding")
    runs = patching.prepare(module, pair)
    estimate = ap.estimate(runs)
    receiving = receiving_activations(module, runs)
    components = [ap.component("heads", (la, h)) for la in range(2) for h in range(4)]
    # alpha 0.1: the cosine moves by 1e-4 here, and float32 rounding, not the O(alpha^2) term, limits the difference
    slope = (exact_change(scaled(runs, receiving, 0.1), components)
             - exact_change(scaled(runs, receiving, -0.1), components)) / 0.2
    ours = raw(estimate, estimate.heads.ravel())
    assert np.abs(ours - slope).max() <= 1e-2 * np.abs(slope).max() and np.abs(slope).max() > 1e-5
    noised = ap.estimate(patching.prepare(module, pair, "noise"))
    assert np.abs(noised.heads - 1).max() <= 1e-4
    assert all(note.startswith("poor: the receiving run is the clean run") for note in noised.notes.values())


# --- the metric through two rows of the head ---------------------------------------------------------------------


def full_logit_metric(module, pair, hidden, position):
    """The logit difference read from every logit, as patching read it before: the model's own head."""
    head = module.unembed if module.config.causal else module.mlm_head
    logits = head(hidden[:, position]).double()
    value = logits[:, pair.target_id]
    return value if pair.contrast_id is None else value - logits[:, pair.contrast_id]


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2", "bert-mlm"])
def test_two_row_metric_equals_the_full_logits(family):
    if family == "gemma2":  # a final soft-cap of 5: the cap applied to each row, not to their difference
        module = tiny_hf.tiny("gemma2")
        assert module.config.final_softcap == 5.0
    elif family == "bert-mlm":
        hf = tiny_hf.tiny_mlm("bert", bpe_tokenizer(False))
        module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
        assert module.mlm_head is not None and not module.config.causal
    else:
        module = tiny_hf.tiny_decoder(family, bpe_tokenizer(family == "llama"), seed=3)[0].module
    torch.manual_seed(0)
    hidden = torch.randn(3, 6, module.config.d_model) * 4
    for contrast in (9, None):
        pair = patching.PatchPair((1,) * 6, (2,) * 6, 4, 4, 5, contrast, ())
        with torch.inference_mode():
            two_rows = patching.metric_function(module, pair, hidden)(hidden, 4)
            full = full_logit_metric(module, pair, hidden, 4)
        assert torch.allclose(two_rows, full, rtol=0, atol=1e-5), (two_rows, full)
    if family == "gemma2":
        uncapped = module.lm_head(hidden[:, 4]).double()
        assert (uncapped[:, 5] - uncapped[:, 9] - full).abs().max() > 0.1  # the cap bites at this scale


# --- agreement and the exact check -------------------------------------------------------------------------------


def test_agreement_and_top_cells():
    exact = np.array([[0.9, -0.5, 0.0], [0.1, np.nan, 0.3]])
    assert ap.top_cells(exact, 3) == [(0, 0), (0, 1), (1, 2)]
    same = ap.agreement(exact, exact, k=2)
    assert same.r == pytest.approx(1.0) and same.overlap == 2 and same.cells == 5
    approx = np.array([[0.8, 0.05, -0.6], [0.1, 0.7, 0.3]])  # NaN in one grid: that cell is left out
    found = ap.agreement(approx, exact, k=2)
    assert found.cells == 5 and found.overlap == 1  # top 2: {(0,0), (0,2)} against {(0,0), (0,1)}
    assert found.r == pytest.approx(np.corrcoef([0.8, 0.05, -0.6, 0.1, 0.3], [0.9, -0.5, 0.0, 0.1, 0.3])[0, 1])
    with pytest.raises(ValueError, match="shape"):
        ap.agreement(approx, exact[0])
    with pytest.raises(ValueError, match="unknown grid"):
        ap.component("attention", (0, 1))


def test_check_top_and_exact_grids_are_patchings(decoder):
    model, _ = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " the")
    runs = patching.prepare(model.module, pair)
    estimate = ap.estimate(runs)
    heads = patching.heads(runs)
    checked = ap.check_top(runs, estimate.heads, 3)
    assert checked.cells == ap.top_cells(estimate.heads, 3)
    assert np.abs(checked.exact - [heads[c] for c in checked.cells]).max() <= 1e-5
    assert np.array_equal(checked.approx, [estimate.heads[c] for c in checked.cells])
    assert np.abs(ap.exact_grid(runs, "heads") - heads).max() <= 1e-5
    residual = ap.exact_grid(runs, "residual")
    assert np.allclose(residual, patching.residual(runs), atol=1e-5, equal_nan=True)
    assert np.array_equal(np.isnan(residual), np.isnan(estimate.residual))
    positions = ap.exact_grid(runs, "head_positions")
    assert np.allclose(positions[1, 2], patching.head_positions(runs, 1, 2), atol=1e-5, equal_nan=True)
    assert np.array_equal(np.isnan(positions), np.isnan(estimate.head_positions))


# --- SmolLM2 offline -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm_runs(smollm):
    """The issue's pair (en-agree-1), denoising: the prepared runs, the estimate and the exact heads grid."""
    spec = next(p for p in builtin_patch_pairs() if p.id == "en-agree-1")
    pair = patching.patch_pair(smollm, spec.clean, spec.corrupt, spec.target, spec.contrast)
    runs, estimate = ap.attribution_patch(smollm, pair)
    return runs, estimate, patching.heads(runs)


@pytest.mark.slow
def test_smollm_heads_estimate_agrees_with_exact_patching(smollm_runs):
    """Measured 0.953 and 8 of the top 10 (benchmarks/bench_attribution_patching.py --agreement; the built-in
    pairs range from 0.43 to 1.00, this pair is the issue's). 0.9 leaves room for rounding and BLAS, not for a
    wrong sign or a lost gradient (which give r near 0)."""
    _, estimate, exact = smollm_runs
    found = ap.agreement(estimate.heads, exact, 10)
    assert found.r > 0.9 and found.overlap >= 7, found


@pytest.mark.slow
def test_smollm_check_top_returns_the_exact_grids_values(smollm_runs):
    runs, estimate, exact = smollm_runs
    checked = ap.check_top(runs, estimate.heads, 10)
    assert len(checked.cells) == 10
    assert np.abs(checked.exact - [exact[c] for c in checked.cells]).max() <= 1e-5  # batch rounding only


# --- the command line ------------------------------------------------------------------------------------------------

ARGS = ["--clean", "The keys to the cabinet", "--corrupt", "The key to the cabinet", "--target", " are",
        "--contrast", " the"]


def test_patch_attribution_json(tiny_llama, capsys):
    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--attribution", "--check", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = attnviz.load(str(tiny_llama))
    pair = patching.patch_pair(model, *ARGS[1::2])
    runs, estimate = ap.attribution_patch(model, pair)
    for grid in ap.GRIDS:
        ours = np.array(out["attribution"][grid], dtype=float)
        assert np.allclose(ours, estimate.grid(grid), atol=1e-6, equal_nan=True), grid
        checked = out["check"][grid]
        assert [tuple(c) for c in checked["cells"]] == ap.top_cells(estimate.grid(grid), 3)
        assert np.allclose(checked["exact"], ap.check_top(runs, estimate.grid(grid), 3, grid).exact, atol=1e-5)
    assert set(out["attribution"]["notes"]) == set(ap.GRIDS)
    assert "heads" not in out  # no exact grid was computed


def test_patch_attribution_check_all_prints_the_agreement(tiny_llama, capsys):
    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--attribution", "--check", "all"]) == 0
    printed = capsys.readouterr().out
    for grid in ap.GRIDS:
        assert f"{grid} against exact patching: r " in printed
    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--check", "2"]) == 2  # --check needs --attribution
    assert "add --attribution" in capsys.readouterr().err
