"""attnviz.interventions.patching against an implementation written here with hooks on Hugging Face's own
modules: a forward pre-hook on the attention's output projection (GPT-2's `attn.c_proj`, Llama's and Gemma 3's
`self_attn.o_proj`) that puts one head's slice of the other run's input in, a forward hook on the MLP that
returns the other run's output, and a forward pre-hook on the decoder layer for the residual stream. Tiny
random GPT-2, Llama (GQA) and Gemma 3 models, SmolLM2 offline and Gemma 3 270M offline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf

import attnviz
from attnviz.interventions import patching
from attnviz.interventions.ablation import ScanStopped
from attnviz.loading import build_module
from tests.helpers import tiny_hf
from tests.helpers.hf_hooks import first_input, hf_layers, with_first_input
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TOL = 1e-4


# --- the reference: hooks on HF's modules ------------------------------------------------------------------


@torch.no_grad()
def hf_value(hf, ids, position, target, contrast, pre=(), post=()):
    """The logit difference of one HF run, with (module, hook) forward pre-hooks and forward hooks."""
    handles = [m.register_forward_pre_hook(f, with_kwargs=True) for m, f in pre]
    handles += [m.register_forward_hook(f) for m, f in post]
    try:
        logits = hf(input_ids=torch.tensor([ids])).logits[0, position].double()
    finally:
        for handle in handles:
            handle.remove()
    return float(logits[target] - logits[contrast])


def hf_captured(hf, ids, position, target, contrast):
    """Every layer's output-projection input, MLP output and layer input in one HF run."""
    seen = {}
    pre, post = [], []
    for layer, (block, proj, mlp) in enumerate(hf_layers(hf)):
        pre.append((proj, lambda m, a, k, layer=layer: seen.__setitem__(("heads", layer), first_input(a, k).clone())))
        pre.append((block, lambda m, a, k, layer=layer: seen.__setitem__(("resid", layer), first_input(a, k).clone())))
        post.append((mlp, lambda m, a, out, layer=layer: seen.__setitem__(("mlp", layer), out.clone())))
    hf_value(hf, ids, position, target, contrast, pre, post)
    return seen


def hf_patched(hf, pair: patching.PatchPair, direction: str, source: dict, component: tuple) -> float:
    """The receiving run's logit difference with one component of the source run (`hf_captured`) put in."""
    denoise = direction == "denoise"
    ids, position = (pair.corrupt_ids, pair.corrupt_position) if denoise else (pair.clean_ids, pair.clean_position)
    partner = {dst: src for src, dst in (pair.pairs if denoise else [(b, a) for a, b in pair.pairs])}
    layer, name, *index = component
    block, proj, mlp = hf_layers(hf)[layer]
    positions = list(partner) if name != "block_inputs" and len(index) < 2 else [index[-1]]

    def put(x, src, columns=slice(None)):
        x = x.clone()
        for p in positions:
            x[0, p, columns] = src[0, partner[p], columns]
        return x

    if name == "head_outputs":
        conv = isinstance(proj, tf.pytorch_utils.Conv1D)  # GPT-2's weight is [in, out]
        width = proj.weight.shape[0 if conv else 1] // hf.config.num_attention_heads
        cols = slice(index[0] * width, (index[0] + 1) * width)
        pre = [(proj, lambda m, a, k: with_first_input(a, k, put(first_input(a, k), source[("heads", layer)], cols)))]
        return hf_value(hf, ids, position, pair.target_id, pair.contrast_id, pre=pre)
    if name == "mlp_outputs":
        post = [(mlp, lambda m, a, out: put(out, source[("mlp", layer)]))]
        return hf_value(hf, ids, position, pair.target_id, pair.contrast_id, post=post)
    pre = [(block, lambda m, a, k: with_first_input(a, k, put(first_input(a, k), source[("resid", layer)])))]
    return hf_value(hf, ids, position, pair.target_id, pair.contrast_id, pre=pre)


def every_component(config, aligned: np.ndarray) -> list[tuple]:
    """All heads, all MLPs, the residual at every aligned position, and head 1 of the last layer per position."""
    layers, positions = range(config.n_layers), [int(p) for p in np.flatnonzero(aligned)]
    return sorted([(layer, "head_outputs", head) for layer in layers for head in range(config.n_heads)]
                  + [(layer, "mlp_outputs") for layer in layers]
                  + [(layer, "block_inputs", p) for layer in layers for p in positions]
                  + [(layers[-1], "head_outputs", 1, p) for p in positions], key=lambda c: c[0])


def assert_matches_hf(module, hf, pair, direction, components=None):
    runs = patching.prepare(module, pair, direction)
    clean = hf_value(hf, pair.clean_ids, pair.clean_position, pair.target_id, pair.contrast_id)
    corrupt = hf_value(hf, pair.corrupt_ids, pair.corrupt_position, pair.target_id, pair.contrast_id)
    assert runs.clean_value == pytest.approx(clean, abs=TOL) and runs.corrupt_value == pytest.approx(corrupt, abs=TOL)
    components = components or every_component(module.config, runs.aligned)
    ours = patching.scan(runs, components, None, None, batch_size=5)  # several batches, each from its own layer
    ours = ours * (runs.clean_value - runs.corrupt_value) + runs.corrupt_value  # back to logit differences
    denoise = direction == "denoise"
    source = hf_captured(hf, pair.clean_ids if denoise else pair.corrupt_ids,
                         pair.clean_position if denoise else pair.corrupt_position, pair.target_id, pair.contrast_id)
    reference = [hf_patched(hf, pair, direction, source, c) for c in components]
    assert np.abs(ours - reference).max() <= TOL, (direction, components[int(np.argmax(np.abs(ours - reference)))])
    return runs


# --- tiny models -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request):
    bos = request.param == "llama"
    return tiny_hf.tiny_decoder(request.param, bpe_tokenizer(bos), seed=3, intermediate_size=37,
                                max_position_embeddings=128)


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_patching_equals_hooks_on_hf_for_a_pair_of_different_lengths(decoder, direction):
    """'keys' is one token of this vocabulary and 'key' two: the common words pair, the span stays unpatched."""
    model, hf = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " the")
    assert len(pair.corrupt_ids) == len(pair.clean_ids) + 1
    span = [i for i, token in enumerate(pair.corrupt_tokens) if token in ("Ġke", "y")]
    assert sorted(set(range(len(pair.corrupt_ids))) - {b for _, b in pair.pairs}) == span
    runs = assert_matches_hf(model.module, hf, pair, direction)
    heat = patching.residual(runs)
    receiving_span = span if direction == "denoise" else [pair.clean_tokens.index("Ġkeys")]
    assert np.isnan(heat[:, receiving_span]).all() and not np.isnan(np.delete(heat, receiving_span, 1)).any()


def test_gemma3_shaped_patching_equals_hooks_on_hf():
    hf = tiny_hf.tiny_hf_model("gemma3_text")
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    clean = [1, 17, 40, 23, 8, 51, 12, 33]
    corrupt = clean[:2] + [77] + clean[3:]
    pair = patching.PatchPair(tuple(clean), tuple(corrupt), 7, 7, 5, 9, tuple((i, i) for i in range(8)))
    for direction in patching.DIRECTIONS:
        assert_matches_hf(module, hf, pair, direction)
    # The one token that differs is the only position whose embedding matters; patching it restores all.
    first = patching.residual(patching.prepare(module, pair))[0]
    assert first[2] == pytest.approx(1.0, abs=1e-5)
    assert np.abs(np.delete(first, 2)).max() <= 1e-5


def test_results_batch_size_and_stop(decoder):
    model, _ = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The cat to the cabinet", " are", " the")
    assert [len(pair.clean_ids)] * 2 == [len(pair.corrupt_ids), len(pair.pairs)]
    calls = []
    whole = patching.patch(model, pair, progress=lambda done, total: calls.append((done, total)))
    c = model.config
    assert whole.heads.shape == (c.n_layers, c.n_heads) and whole.mlps.shape == (c.n_layers,)
    assert whole.residual.shape == (c.n_layers, len(pair.corrupt_ids))
    assert calls[-1][0] == calls[-1][1] == c.n_layers * c.n_heads + c.n_layers + whole.residual.size
    runs = patching.prepare(model.module, pair)
    one_by_one = patching.heads(runs, batch_size=1)
    scale = abs(whole.clean_value - whole.corrupt_value)  # compared in logit-difference units
    assert np.abs(one_by_one - whole.heads).max() * scale <= 1e-5
    with pytest.raises(ScanStopped):
        patching.heads(runs, should_stop=lambda: True)


def test_targets_must_be_one_token_each_and_differ(decoder):
    model, _ = decoder
    with pytest.raises(ValueError, match=r"' is' is \d tokens \('.*' \+ '") as refused:
        patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " is")
    assert "Ġ" not in str(refused.value)  # each piece as the text it stands for
    with pytest.raises(ValueError, match="same token"):
        patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " are")


def test_a_common_word_tokenised_differently_is_refused(smollm):
    # "cabinet" opening the text has no leading space, so it is not the token " cabinet".
    assert smollm.encode("cabinet keys").tokens != smollm.encode("The cabinet keys").tokens[1:]
    with pytest.raises(ValueError, match="common word"):
        patching.patch_pair(smollm, "cabinet keys", "The cabinet keys", " are", " is")


# --- SmolLM2 offline -------------------------------------------------------------------------------------------


def test_smollm_patching_equals_hooks_on_hf(smollm, smollm_causal_reference):
    smollm_hf = smollm_causal_reference  # HF's own SmolLM2, loaded once per run (tests/conftest.py)
    pair = patching.patch_pair(smollm, "The keys to the cabinet", "The key to the cabinet", " are", " is")
    components = [(0, "block_inputs", 1), (13, "mlp_outputs"), (26, "head_outputs", 0), (27, "head_outputs", 8, 4)]
    for direction in patching.DIRECTIONS:
        assert_matches_hf(smollm.module, smollm_hf, pair, direction, components)


# --- Gemma 3 270M offline ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_gemma3_270m_patching_and_attribution_equal_hf():
    """Gemma 3 270M's real weights (MQA, sliding and full layers, q/k norms, sandwich norms): activation
    patching equals hooks on HF's own Gemma3ForCausalLM, and the direct logit attribution's parts sum to HF's
    own logit difference, each within 1e-4."""
    from attnviz.loading.offline import GEMMA3_270M
    from attnviz.readouts import attribution
    from tests.conftest import require_offline

    require_offline(GEMMA3_270M)
    gemma = attnviz.load(GEMMA3_270M)
    path = Path(gemma.info.path)
    hf = tf.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    pair = patching.patch_pair(gemma, "The keys to the cabinet", "The key to the cabinet", " are", " is")
    components = [(0, "block_inputs", 1), (5, "mlp_outputs"), (11, "head_outputs", 3), (17, "head_outputs", 0, 2)]
    for direction in patching.DIRECTIONS:
        assert_matches_hf(gemma.module, hf, pair, direction, components)
    split = attribution.attribute(gemma, "The keys to the cabinet", " are", " is")
    own = hf_value(hf, pair.clean_ids, pair.clean_position, pair.target_id, pair.contrast_id)
    assert split.value == pytest.approx(own, abs=TOL)
    assert split.embed + split.heads.sum() + split.mlps.sum() + split.rest == pytest.approx(own, abs=TOL)
