"""DeepSeek-V2 and DeepSeek-V3 (multi-head latent attention, DeepSeekMoE) against HF eager, float32, tiny random
configs (issue 29), and the latent KV cache against the full forward pass.

Bounds as every family's: attentions <= 1e-5, hidden states and logits <= 1e-4, on a right-padded batch. Each
special part has a config where it matters and a check that our model with that part switched off (same
weights) misses parity by a clear margin: the interleaved rotary layout, YaRN's mscale^2 on the softmax scale,
the latent's RMSNorm, the group-limited routing and V3's score-correction bias. References: HF's
modeling_deepseek_v2 / modeling_deepseek_v3, eager attention, the eager (per-expert loop) experts.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers as tf
from safetensors.torch import load_file
from torch import nn

import attnviz
from attnviz.analysis.query_key import query_key
from attnviz.loading import build_module
from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import Recorder
from tests.helpers.decoding import step_by_step
from tests.helpers.tiny_hf import ATTENTION_TOL, HIDDEN_TOL, assert_parity, batch, deepseek, hf_model
from tests.helpers.tiny_tokenizers import bpe_tokenizer

CLEAR = 1e-3  # a switched-off part must miss parity by at least this much
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4,
        "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32, "beta_slow": 1}  # DeepSeek-V2's own values
# V3's routing made to bite: 3 of 8 experts from the best 2 of 4 groups, renormalised and scaled.
V3 = dict(q_lora_rank=24, n_shared_experts=1, num_experts_per_tok=3, routed_scaling_factor=2.5, norm_topk_prob=True)
CONFIGS = {
    "v3": deepseek(3, **V3),
    "v3-yarn-q-proj": deepseek(3, q_lora_rank=None, rope_parameters=dict(YARN, mscale=1.0, mscale_all_dim=1.0)),
    "v3-split-half": deepseek(3, **V3, rope_interleave=False),
    "v2-yarn-group-limited": deepseek(2, topk_method="group_limited_greedy", topk_group=1, n_shared_experts=2,
                                      routed_scaling_factor=1.5, rope_parameters=dict(YARN)),
    "v2-greedy-low-rank-query": deepseek(2, q_lora_rank=24, topk_method="greedy", n_group=None, topk_group=None),
}


def reference(name):
    hf = hf_model(CONFIGS[name])
    hf.set_experts_implementation("eager")
    with torch.no_grad():  # V3's load-balancing offsets, large enough to change which experts are chosen
        for layer in hf.model.layers[1:]:
            if hasattr(layer.mlp.gate, "e_score_correction_bias"):
                layer.mlp.gate.e_score_correction_bias.copy_(torch.linspace(-0.3, 0.3, 8).roll(3))
    return hf.eval()


@pytest.fixture(scope="module")
def models():
    """name -> (HF model, ours, HF's outputs on the batch, HF's last hidden states)."""
    ids, mask, _ = batch(0)
    built = {}
    for name in CONFIGS:
        hf = reference(name)
        with torch.no_grad():
            ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
            base = hf.model(input_ids=ids, attention_mask=mask).last_hidden_state
        built[name] = hf, build_module(hf.config.to_dict(), hf.state_dict()).eval(), ref, base
    return built


def errors(out, ref, base, mask) -> tuple[float, float, float]:
    keep = mask.bool()
    attn = (out.attentions - torch.stack(ref.attentions)).abs().transpose(2, 3)[:, keep].max()
    return float(attn), float((out.hidden - base).abs()[keep].max()), float((out.logits - ref.logits).abs()[keep].max())


@pytest.mark.parametrize("name", CONFIGS)
def test_deepseek_matches_hf_eager(models, name):
    hf, ours, ref, base = models[name]
    ids, mask, _ = batch(0)
    with torch.no_grad():
        out = ours(ids, mask)
    assert_parity(out, ref.attentions, base, mask)
    attn, hidden, logits = errors(out, ref, base, mask)
    assert logits <= HIDDEN_TOL, (name, logits)
    assert ours.config.attention_kind == "MLA"
    print(f"{name}: attentions {attn:.2e}, hidden {hidden:.2e}, logits {logits:.2e}")


def switched_off(ours, change=None, edit=None) -> Transformer:
    """Our model with the same weights and one part switched off: a config change, or an edit of the module."""
    module = Transformer(dataclasses.replace(ours.config, **(change or {}))).eval()
    module.load_state_dict(ours.state_dict())
    if edit is not None:
        edit(module)
    return module


def no_latent_norm(module):
    for block in module.blocks:
        block.attn.kv_a_layernorm = nn.Identity()


def no_score_correction(module):
    for block in module.blocks[1:]:
        block.mlp.e_score_correction_bias.zero_()


def interleave_ignored(hf, ours):
    """Converted as if the checkpoint's rotary rows were split-half already."""
    return build_module({**hf.config.to_dict(), "rope_interleave": False}, hf.state_dict()).eval()


SWITCHES = {
    "rope interleave (V3)": ("v3", interleave_ignored),
    "yarn mscale^2 on the scale": ("v3-yarn-q-proj", lambda hf, ours: switched_off(
        ours, {"attn_scale": ours.config.dim_per_head**-0.5})),
    "the latent's RMSNorm": ("v3", lambda hf, ours: switched_off(ours, edit=no_latent_norm)),
    "group-limited routing (V3)": ("v3", lambda hf, ours: switched_off(ours, {"n_group": 1, "topk_group": 1})),
    "group-limited routing (V2)": ("v2-yarn-group-limited", lambda hf, ours: switched_off(
        ours, {"n_group": 1, "topk_group": 1})),
    "the score-correction bias (V3)": ("v3", lambda hf, ours: switched_off(ours, edit=no_score_correction)),
}


@pytest.mark.parametrize("part", SWITCHES)
def test_each_special_part_matters(models, part):
    name, off = SWITCHES[part]
    hf, ours, ref, base = models[name]
    ids, mask, _ = batch(0)
    with torch.no_grad():
        out = off(hf, ours)(ids, mask)
    attn, hidden, logits = errors(out, ref, base, mask)
    worst = max(attn, hidden * ATTENTION_TOL / HIDDEN_TOL, logits * ATTENTION_TOL / HIDDEN_TOL)
    assert worst > CLEAR, f"switching off {part} left parity within {worst:.2e}"


def test_the_latent_cache_decodes_as_the_full_forward(models):
    """A prompt of 5, a chunk of 3, then one token a step through the absorbed form over the latent cache:
    logits and attention rows as the full pass, and the cache holds only latents and rotary keys."""
    _, ours, _, _ = models["v2-yarn-group-limited"]  # YaRN's angles at each cached position
    ids = batch(0)[0][:1]
    c = ours.config
    with torch.no_grad():
        full = ours(ids)
        logits, rows = step_by_step(ours, ids, (5, 3))
    assert (logits - full.logits[0]).abs().max() <= HIDDEN_TOL
    assert (rows - full.attentions[:, 0]).abs().max() <= ATTENTION_TOL
    cache, t = KVCache(c.n_layers), ids.shape[1]
    with torch.no_grad():
        ours(ids, cache=cache)
    assert tuple(cache[0].keys.shape) == (1, 1, t, c.kv_lora_rank)  # the latent per token
    assert tuple(cache[0].values.shape) == (1, 1, t, c.qk_rope_head_dim)  # the shared rotary key per token
    assert cache.nbytes == c.n_layers * t * (c.kv_lora_rank + c.qk_rope_head_dim) * 4


def test_the_query_key_view_splits_the_score_into_the_latent_and_the_rotary_terms(models):
    """For every head and query of the first sequence: the no-rope term (the query against the key rebuilt from
    the latent) plus the rotary term (against the shared rotary key) are the content score, and their softmax
    is HF's attention row."""
    _, ours, ref, _ = models["v3"]
    ids = batch(0)[0][:1]
    with torch.no_grad():
        record = ours(ids, record=Recorder("queries", "keys")).record
    hf_rows = torch.stack(ref.attentions)[:, 0].double().numpy()  # L, H, T, S
    worst, t = 0.0, ids.shape[1]
    for layer in range(ours.config.n_layers):
        queries, keys = record.stacked("queries")[layer, 0].numpy(), record.stacked("keys")[layer, 0].numpy()
        for head in range(ours.config.n_heads):
            for position in range(t):
                view = query_key(queries, keys, ours.kv_group, head, position, **ours.score_setup(layer, head))
                nope, rope = view.parts["no-rope"], view.parts["rope"]
                assert abs(nope + rope - view.products.sum(-1)).max() <= 1e-9
                assert abs(rope[:position + 1]).max() > 0 and abs(nope[:position + 1]).max() > 0
                worst = max(worst, float(abs(view.probabilities - hf_rows[layer, head, position]).max()))
    assert worst <= ATTENTION_TOL


def test_a_saved_deepseek_v3_folder_loads_through_attnviz_load(tmp_path):
    """save_pretrained's files (one module per expert, as hub checkpoints keep them) and a tokenizer:
    attnviz.load gives HF's attention and logits on a text."""
    tokenizer = bpe_tokenizer(bos=True)
    hf = hf_model(deepseek(3, **V3, vocab_size=tokenizer.get_vocab_size(), pad_token_id=1))
    hf.set_experts_implementation("eager")
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>").save_pretrained(tmp_path)
    on_disk = load_file(str(tmp_path / "model.safetensors"))
    assert "model.layers.1.mlp.experts.7.gate_proj.weight" in on_disk  # the hub's per-expert names: stacked here
    model = attnviz.load(str(tmp_path), device="cpu")
    assert model.info.model_type == "deepseek_v3" and model.info.attention_kind == "MLA"
    trace = model.run("The keys to the cabinet are on the table, and the cat sat on the mat.")
    ids = torch.tensor([trace.input_ids])
    with torch.no_grad():
        ref = hf(input_ids=ids, output_attentions=True)
        logits = model.module.unembed(torch.as_tensor(trace.hidden)[None])[0]
    assert abs(trace.attentions - torch.stack(ref.attentions)[:, 0].numpy()).max() <= ATTENTION_TOL
    assert (logits - ref.logits[0]).abs().max() <= HIDDEN_TOL
