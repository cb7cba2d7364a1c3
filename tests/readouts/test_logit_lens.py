"""The logit lens and direct logit attribution against Hugging Face's own models: HF's hidden states (and the
input of HF's own norm after each attention sub-block) read through HF's final norm and lm_head; one head's
direct effect from forward hooks on HF's modules; the parts summing to HF's logits, on GPT-2-, Llama- and
Gemma-3-shaped tiny configs, a tiny BERT masked-LM, and SmolLM2 offline."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import attnviz
from attnviz.__main__ import main
from attnviz.loading import build_module
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.readouts import attribution, logit_lens, recorded_run
from attnviz.transformer.decompose import DECOMPOSE_NAMES
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import tiny_mlm, tiny_pair
from tests.helpers.tiny_tokenizers import bpe_tokenizer, encoder_tokenizer

T = 10
POSITIONS = [0, 4, T - 1]
# Where each family's pieces sit in HF: (blocks, final norm, the norm whose input is the stream after the
# attention sub-block, attention's output projection, the norm right after it or None).
HF_PARTS = {
    "gpt2": lambda hf: (hf.transformer.h, hf.transformer.ln_f, "ln_2", "attn.c_proj", None),
    "llama": lambda hf: (hf.model.layers, hf.model.norm, "post_attention_layernorm", "self_attn.o_proj", None),
    "gemma3_text": lambda hf: (hf.model.layers, hf.model.norm, "pre_feedforward_layernorm", "self_attn.o_proj",
                               "post_attention_layernorm"),
}


@pytest.fixture(scope="module", params=list(HF_PARTS))
def family(request):
    module, hf = tiny_pair(request.param)
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(1))
    tokenizer = bpe_tokenizer(bos=False)  # 300 entries: any of the tiny vocabulary's 99 ids decodes
    model = LoadedModel(module, tokenizer, ModelInfo.describe(module, request.param, "(test)", request.param, 64),
                        {"pad_token": "<pad>"})
    return request.param, hf, model, ids


def _run(model, ids, names, position):
    with torch.no_grad():
        out = model.module(ids, record=Recorder(*names), with_logits=False)
    return recorded_run.Run(ids, recorded_run.token_texts(model, ids[0].tolist()), position, out)


def _sub(module, path):
    for name in path.split("."):
        module = getattr(module, name)
    return module


def test_every_read_equals_hf_own_states_through_hf_final_norm_and_lm_head(family):
    model_type, hf, model, ids = family
    blocks, final_norm, mid_norm, _, _ = HF_PARTS[model_type](hf)
    mids = {}
    hooks = [_sub(block, mid_norm).register_forward_pre_hook(
        lambda _, args, layer=layer: mids.__setitem__(layer, args[0])) for layer, block in enumerate(blocks)]
    try:
        with torch.no_grad():
            reference = hf(input_ids=ids, output_hidden_states=True)
            n = len(blocks)
            states = {"embed": reference.hidden_states[0]}
            for layer in range(n):
                states[f"L{layer}.attn"] = mids[layer]
                if layer + 1 < n:
                    states[f"L{layer}"] = reference.hidden_states[layer + 1]
            expected = {label: hf.lm_head(final_norm(state))[0, POSITIONS] for label, state in states.items()}
            expected[f"L{n - 1}"] = reference.logits[0, POSITIONS]
    finally:
        for hook in hooks:
            hook.remove()
    run = _run(model, ids, logit_lens.LENS_NAMES, T - 1)
    labels, logits = logit_lens.lens_logits(model.module, run.out, POSITIONS)
    assert labels == list(expected)
    for label, read in zip(labels, logits):
        assert (read - expected[label]).abs().max() <= 1e-4, (model_type, label)
    lens = logit_lens.logit_lens(model, "", run=run, k=3)
    own = reference.logits[0, -1]
    assert lens.top1[-1] == int(own.argmax()) == lens.target_id and lens.target_rank[-1] == 0
    assert len(lens.top1) == len(blocks) + 1 and lens.grid_ids.shape == (len(blocks) + 1, T)
    assert lens.grid_ids[-1].tolist() == reference.logits[0].argmax(-1).tolist()


def _frozen(norm, x, part):
    """`part` through HF's norm with its scale fixed by HF's own input x (RMSNorm, Gemma's 1 + w, LayerNorm)."""
    x, part = x.double(), part.double()
    if isinstance(norm, torch.nn.LayerNorm):
        return (part - part.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False) + norm.eps) \
            * norm.weight.detach().double()
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    weight = norm.weight.detach().double() + (1.0 if "Gemma" in type(norm).__name__ else 0.0)
    return part * torch.rsqrt(x.pow(2).mean(-1) + eps) * weight


def test_the_parts_sum_to_hf_logit_and_one_head_equals_hooks_on_hf_modules(family):
    model_type, hf, model, ids = family
    blocks, final_norm, _, o_proj_path, post_norm_path = HF_PARTS[model_type](hf)
    layer, head, target, contrast = 1, 2, 7, 11
    seen = {}
    o_proj = _sub(blocks[layer], o_proj_path)
    hooks = [o_proj.register_forward_pre_hook(lambda _, args: seen.__setitem__("context", args[0])),
             final_norm.register_forward_pre_hook(lambda _, args: seen.__setitem__("final", args[0]))]
    if post_norm_path:
        hooks.append(_sub(blocks[layer], post_norm_path).register_forward_pre_hook(
            lambda _, args: seen.__setitem__("attn_out", args[0])))
    try:
        with torch.no_grad():
            logits = hf(input_ids=ids).logits[0, -1].double()
    finally:
        for hook in hooks:
            hook.remove()
    d = model.config.dim_per_head
    context = seen["context"][0, -1, head * d:(head + 1) * d].double()
    weight = o_proj.weight.detach().double()  # GPT-2's Conv1D stores [in, out], nn.Linear [out, in]
    part = context @ (weight[head * d:(head + 1) * d] if model_type == "gpt2" else weight[:, head * d:(head + 1) * d].T)
    if post_norm_path:
        part = _frozen(_sub(blocks[layer], post_norm_path), seen["attn_out"][0, -1], part)
    part = _frozen(final_norm, seen["final"][0, -1], part)
    row = hf.lm_head.weight.detach().double()
    expected_head = float(part @ (row[target] - row[contrast]))

    result = attribution.attribute(model, "", target, contrast, run=_run(model, ids, DECOMPOSE_NAMES, T - 1))
    assert result.value == pytest.approx(float(logits[target] - logits[contrast]), abs=1e-4)
    assert result.total() == pytest.approx(result.value, abs=1e-4)
    assert result.heads.shape == (model.config.n_layers, model.config.n_heads)
    assert result.heads[layer, head] == pytest.approx(expected_head, abs=1e-5)
    tokens = attribution.head_tokens(model, result, layer, head, k=3)
    effect = (part @ row.T).tolist()
    assert [i for i, _, _ in tokens.promoted] == sorted(range(len(effect)), key=lambda i: -effect[i])[:3]


def test_attribution_of_a_masked_lm_sums_to_its_logit_at_the_mask():
    tokenizer = encoder_tokenizer()
    hf = tiny_mlm("bert", tokenizer)
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    model = LoadedModel(module, tokenizer, ModelInfo.describe(module, "tiny bert MLM", "(test)", "bert", 60),
                        {"pad_token": "[PAD]"})
    text = "The keys to the [MASK] are on the table."
    ids = tokenizer.encode(text).ids
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0].double()
    result = attribution.attribute(model, text, target=9, contrast=12)
    assert result.position == ids.index(tokenizer.token_to_id("[MASK]")) and result.masked_lm
    at = logits[result.position]
    assert result.value == pytest.approx(float(at[9] - at[12]), abs=1e-4)
    assert result.total() == pytest.approx(result.value, abs=1e-4)
    lens = logit_lens.logit_lens(model, text)
    assert lens.top1[-1] == int(at.argmax())


def test_smollm_attribution_sums_and_the_lens_ends_on_its_prediction_through_the_cli(smollm, monkeypatch, capsys):
    monkeypatch.setattr(attnviz, "load", lambda source: smollm)
    text = "The keys to the cabinet"
    assert main(["attribute", "--model", "smollm", "--text", text, "--target", " are", "--contrast", " is",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    total = out["embed"] + sum(map(sum, out["heads"])) + sum(out["mlps"]) + out["rest"]
    assert total == pytest.approx(out["value"], abs=1e-4)
    assert len(out["heads"]) == 30 and len(out["heads"][0]) == 9 and out["contrast_id"] is not None
    assert main(["lens", "--model", "smollm", "--text", text, "--json"]) == 0
    lens = json.loads(capsys.readouterr().out)
    from attnviz.readouts import predictions
    assert lens["top1"][-1] == predictions.next_token_top_k(smollm, text, k=1)[0].id
    assert len(lens["top1"]) == 31 and lens["position"] == len(lens["tokens"]) - 1
    assert main(["attribute", "--model", "smollm", "--text", text, "--target", " qzxjvwq"]) == 2
    assert "not one" in capsys.readouterr().err


@pytest.mark.parametrize("position, k, said", [(1.5, 5, "position must be a whole number"),
                                                (True, 5, "position must be a whole number"),
                                                (99, 5, "outside the text's"),
                                                (None, -3, "k must be a whole number of at least 1"),
                                                (None, 0, "k must be a whole number of at least 1"),
                                                (None, 2.5, "k must be a whole number of at least 1")])
def test_an_ill_formed_position_or_k_is_a_sentence_not_an_index_error(family, position, k, said):
    _, _, model, ids = family
    run = _run(model, ids, logit_lens.LENS_NAMES, T - 1)
    with pytest.raises(ValueError, match=said):
        logit_lens.logit_lens(model, "", position, k=k, run=run)
    assert logit_lens.logit_lens(model, "", 2, k=1, run=run).position == 2
    assert logit_lens.logit_lens(model, "", np.int64(-1), k=1, run=run).position == T - 1  # numpy ints are whole too
