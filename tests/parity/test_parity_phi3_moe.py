"""Phi-3/Phi-4, Mixtral and gpt-oss against HF eager (float32) on tiny random configs (issue 17).

Bounds as tests/parity/test_parity_tiny.py: attentions <= 1e-5, hidden states and logits <= 1e-4, on a right-padded
batch (and left padding for gpt-oss, whose sinks share each row with masked keys). Every special feature
(LongRoPE on both sides of original_max_position_embeddings, partial rotary, sliding windows, fused
projections, expert routing, learned sinks, YaRN, the clamped SwiGLU) has a tiny config where it matters,
and a check that our model with the feature switched off (same weights) FAILS parity by a clear margin.
The references are HF's modeling_phi3 / modeling_mixtral / modeling_gpt_oss, eager attention and the eager
(per-expert loop) experts implementation, and HF's own rope functions (modeling_rope_utils).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import transformers as tf
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssMLP
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

import attnviz
from attnviz.loading import build_module
from attnviz.loading.converters.gpt_oss import _deinterleaved, gpt_oss_config
from attnviz.loading.converters.phi3 import phi3_config
from attnviz.transformer.layers import MixtureOfExperts
from attnviz.transformer.model import Transformer
from attnviz.transformer.rope import rope_frequencies
from tests.helpers.decoding import step_by_step
from tests.helpers.tiny_hf import (
    ATTENTION_TOL,
    GPT_OSS_ROPE,
    HIDDEN_TOL,
    LONG,
    SHORT,
    VOCAB,
    assert_parity,
    batch,
    gpt_oss,
    hf_model,
    mixtral,
    phi3,
)
from tests.helpers.tiny_tokenizers import bpe_tokenizer

T = 12  # tokens of the test batch (tests.helpers.tiny_hf.batch)
CLEAR = 1e-3  # a switched-off feature must miss parity by at least this much


def reference(factory):
    """hf_model (random weights, every tensor nudged) with the per-expert loop of HF's modeling file."""
    model = hf_model(factory)
    if hasattr(model, "set_experts_implementation") and model._can_set_experts_implementation():
        model.set_experts_implementation("eager")
    if isinstance(model, tf.GptOssForCausalLM):
        with torch.no_grad():  # sinks large enough that every row visibly sums to less than 1
            for i, layer in enumerate(model.model.layers):
                layer.self_attn.sinks.copy_(torch.linspace(0.5, 3.0, 4) + 0.25 * i)
    return model.eval()


def hf_outputs(hf, ids, mask):
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
    return ref, base


def parity_error(out, ref, base, mask) -> float:
    """The largest of: attention difference, hidden-state and logit differences scaled to the attention
    bound (so one number says by how much the contract is met or missed)."""
    keep = mask.bool()
    attn = (out.attentions - torch.stack(ref.attentions)).abs().transpose(2, 3)[:, keep].max()
    hidden = (out.hidden - base.last_hidden_state).abs()[keep].max()
    logits = (out.logits - ref.logits).abs()[keep].max()
    return max(float(attn), float(hidden) * ATTENTION_TOL / HIDDEN_TOL, float(logits) * ATTENTION_TOL / HIDDEN_TOL)


def check(hf, ours, ids, mask):
    ref, base = hf_outputs(hf, ids, mask)
    with torch.no_grad():
        out = ours(ids, mask)
    assert_parity(out, ref.attentions, base.last_hidden_state, mask)
    logits = (out.logits - ref.logits).abs()[mask.bool()].max()
    assert logits <= HIDDEN_TOL, logits
    return out, ref


def switched_off(ours, **change) -> Transformer:
    """Our model with a config change and the same weights (tensors the changed model lacks are dropped)."""
    module = Transformer(dataclasses.replace(ours.config, **change)).eval()
    state = {k: v for k, v in ours.state_dict().items() if k in module.state_dict()}
    module.load_state_dict(state, strict=True)
    return module


def assert_feature_matters(hf, ours, ids, mask, **change):
    ref, base = hf_outputs(hf, ids, mask)
    with torch.no_grad():
        off = switched_off(ours, **change)(ids, mask)
    error = parity_error(off, ref, base, mask)
    assert error > CLEAR, f"switching off {change} left parity within {error:.2e}"
    with pytest.raises(AssertionError):
        assert_parity(off, ref.attentions, base.last_hidden_state, mask)


def build(hf):
    return build_module(hf.config.to_dict(), hf.state_dict()).eval()


# --- Phi-3 / Phi-4 ------------------------------------------------------------------------------------------

PHI3 = {
    "phi3-longrope-long": phi3(original=8),  # 12 tokens > 8: the long factors
    "phi3-longrope-short": phi3(original=16),  # 12 tokens <= 16: the short factors
    "phi3-mha": phi3(n_kv=4, rope=False),
    "phi3-mqa-window": phi3(n_kv=1, rope=False, sliding_window=4),
    "phi4-mini-partial": phi3(original=8, partial=0.75, tie_word_embeddings=True),  # Phi-4-mini: 3/4 rotated
}


@pytest.mark.parametrize("family", PHI3)
def test_phi3_parity_padded(family):
    hf = reference(PHI3[family])
    ours = build(hf)
    ids, mask, _ = batch(pad_id=0)
    check(hf, ours, ids, mask)
    n_kv = hf.config.num_key_value_heads
    assert ours.kv_group == [h // (4 // n_kv) for h in range(4)]


@pytest.mark.parametrize("family, change", [
    ("phi3-longrope-long", "short"),  # using the short factors beyond the original context is wrong
    ("phi3-longrope-short", "long"),  # and the long ones within it
])
def test_phi3_longrope_side_matters(family, change):
    hf = reference(PHI3[family])
    ours = build(hf)
    scaling = dict(ours.config.rope_scaling)
    scaling["short_factor" if change == "long" else "long_factor"] = scaling[f"{change}_factor"]
    ids, mask, _ = batch(pad_id=0)
    assert_feature_matters(hf, ours, ids, mask, rope_scaling=scaling)


def test_phi3_features_matter():
    ids, mask, _ = batch(pad_id=0)
    hf = reference(PHI3["phi4-mini-partial"])
    ours = build(hf)
    assert ours.config.rotary_dim == 6 and ours.config.tie_word_embeddings
    assert_feature_matters(hf, ours, ids, mask, rotary_dim=None, rope_scaling=None)  # rotate all of each head
    hf = reference(PHI3["phi3-mqa-window"])
    ours = build(hf)
    assert ours.config.sliding_window == 4
    assert_feature_matters(hf, ours, ids, mask, sliding_window=None)


def test_phi3_fused_split_order_matters():
    """q, k, v rows of qkv_proj and gate, up rows of gate_up_proj: swapping the parts breaks parity."""
    hf = reference(PHI3["phi3-longrope-long"])
    ids, mask, _ = batch(pad_id=0)
    ref, base = hf_outputs(hf, ids, mask)
    state = dict(hf.state_dict())
    gate_up = state["model.layers.0.mlp.gate_up_proj.weight"]
    state["model.layers.0.mlp.gate_up_proj.weight"] = torch.cat(gate_up.chunk(2)[::-1])  # up, gate
    with torch.no_grad():
        out = build_module(hf.config.to_dict(), state).eval()(ids, mask)
    assert parity_error(out, ref, base, mask) > CLEAR


@pytest.mark.parametrize("seq_len", [8, 9])  # at and just beyond original_max_position_embeddings = 8
@pytest.mark.parametrize("partial", [1.0, 0.75])
def test_longrope_frequencies_match_hf(seq_len, partial):
    config = phi3(original=8, partial=partial)().config
    ours = phi3_config(config.to_dict())
    rotated = int(8 * partial)
    assert (ours.rotary_dim or ours.dim_per_head) == rotated
    inv_freq, factor = rope_frequencies(rotated, ours.rope_theta, ours.rope_scaling, seq_len)
    ref, ref_factor = ROPE_INIT_FUNCTIONS["longrope"](config, seq_len=seq_len)
    assert torch.equal(inv_freq, ref) and factor == ref_factor
    factors = (LONG if seq_len > 8 else SHORT)[:rotated // 2]
    plain, _ = rope_frequencies(rotated, 10000.0)
    assert torch.allclose(inv_freq * torch.tensor(factors), plain)  # the side's factors divide the frequencies
    assert factor == pytest.approx(math.sqrt(1 + math.log(64 / 8) / math.log(8)))  # HF's default attention factor


def test_longrope_at_phi4_mini_scale_matches_hf():
    """Phi-4-mini's shape: head_dim 128, 3/4 rotated (48 pairs), original context 4096 of 131072."""
    factors = [1.0 + i / 8 for i in range(48)]
    config = tf.Phi3Config(hidden_size=3072, num_attention_heads=24, num_key_value_heads=8,
                           max_position_embeddings=131072, original_max_position_embeddings=4096,
                           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.75, "short_factor": factors,
                                            "long_factor": [f * 4 for f in factors]})
    ours = phi3_config(config.to_dict())
    assert ours.rotary_dim == 96
    for seq_len in (4096, 4097):
        inv_freq, factor = rope_frequencies(96, ours.rope_theta, ours.rope_scaling, seq_len)
        ref, ref_factor = ROPE_INIT_FUNCTIONS["longrope"](config, seq_len=seq_len)
        assert torch.equal(inv_freq, ref) and factor == ref_factor


@pytest.mark.parametrize("legacy", ["su", "yarn"])
def test_phi3_legacy_rope_names_are_longrope(legacy):
    """Old Phi-3 configs call LongRoPE "su" or "yarn"; HF maps both to longrope, and so do we, from HF's
    normalised config and from the raw config.json form alike. (transformers 5.24 quirk: an "su" config must
    repeat original_max_position_embeddings inside rope_scaling, or Phi3Config raises KeyError, because
    standardize_rope_params copies the top-level value only for the names llama3/yarn/longrope.)"""
    scaling = {"type": legacy, "short_factor": SHORT, "long_factor": LONG, "original_max_position_embeddings": 8}
    hf = reference(lambda: tf.Phi3ForCausalLM(tf.Phi3Config(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=37, max_position_embeddings=64, original_max_position_embeddings=8, rope_scaling=scaling,
        pad_token_id=0)))
    assert hf.config.rope_parameters["rope_type"] == "longrope"
    ours = build(hf)
    ids, mask, _ = batch(pad_id=0)
    check(hf, ours, ids, mask)
    raw = {k: v for k, v in hf.config.to_dict().items() if k != "rope_parameters"}
    raw |= {"rope_scaling": scaling, "rope_theta": 10000.0}
    assert phi3_config(raw).rope_scaling["rope_type"] == "longrope"
    assert phi3_config(raw).rope_scaling["long_factor"] == LONG


def test_phi3_refuses_other_rope_types():
    config = tf.Phi3Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                           intermediate_size=37, pad_token_id=0).to_dict()
    config["rope_parameters"] = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    with pytest.raises(ValueError, match="rope_type 'linear' is not supported for phi3"):
        phi3_config(config)


# --- Mixtral ------------------------------------------------------------------------------------------------

MIXTRAL = {"mixtral": mixtral(), "mixtral-window": mixtral(sliding_window=4)}


@pytest.mark.parametrize("family", MIXTRAL)
def test_mixtral_parity_padded(family):
    hf = reference(MIXTRAL[family])
    ours = build(hf)
    ids, mask, _ = batch(pad_id=0)
    check(hf, ours, ids, mask)


def test_mixtral_features_matter():
    hf = reference(MIXTRAL["mixtral-window"])
    ours = build(hf)
    ids, mask, _ = batch(pad_id=0)
    assert_feature_matters(hf, ours, ids, mask, sliding_window=None)
    assert_feature_matters(hf, ours, ids, mask, experts_per_token=1)  # the top-2 mixture, not the best expert
    assert_feature_matters(hf, ours, ids, mask, experts_per_token=4)  # nor all four experts


def test_mixtral_hub_layout_converts_as_transformers_does(tmp_path):
    """save_pretrained writes Mixtral's original per-expert names (block_sparse_moe.experts.N.w1/w2/w3);
    our stacking of them gives exactly the tensors of HF's own conversion mapping on load."""
    from safetensors.torch import load_file

    hf = reference(MIXTRAL["mixtral"])
    hf.save_pretrained(tmp_path)
    on_disk = load_file(str(tmp_path / "model.safetensors"))
    assert "model.layers.0.block_sparse_moe.experts.3.w1.weight" in on_disk
    assert not any(".mlp.experts." in k for k in on_disk)
    from_disk = build_module(hf.config.to_dict(), on_disk).state_dict()
    in_memory = build(hf).state_dict()
    assert from_disk.keys() == in_memory.keys()
    assert all(torch.equal(from_disk[k], in_memory[k]) for k in in_memory)
    reloaded = tf.MixtralForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(reloaded.model.layers[1].mlp.experts.gate_up_proj, in_memory["blocks.1.mlp.gate_up"])


# --- gpt-oss ------------------------------------------------------------------------------------------------


def left_padded():
    ids, mask, _ = batch(pad_id=0)
    ids, mask = ids.clone(), mask.clone()
    ids[1] = torch.roll(ids[1], 3)
    mask[1] = torch.roll(mask[1], 3)
    return ids, mask


@pytest.mark.parametrize("padding", ["right", "left"])
def test_gpt_oss_parity_and_learned_sink_mass(padding):
    hf = reference(gpt_oss())
    ours = build(hf)
    assert [ours.config.window(i) for i in range(3)] == [4, None, 4]  # sliding, full, sliding
    ids, mask = batch(pad_id=0)[:2] if padding == "right" else left_padded()
    out, ref = check(hf, ours, ids, mask)
    keep = mask.bool()
    ours_sums = out.attentions.sum(-1).transpose(2, 3)[:, keep]  # L, N, H
    ref_sums = torch.stack(ref.attentions).sum(-1).transpose(2, 3)[:, keep]
    assert (ours_sums - ref_sums).abs().max() <= ATTENTION_TOL
    sink_mass = 1 - ours_sums
    assert sink_mass.min() > 0.05  # every real row gives a visible share to the sink
    assert sink_mass.max() < 0.99  # and every row still attends


def test_gpt_oss_features_matter():
    hf = reference(gpt_oss())
    ours = build(hf)
    ids, mask, _ = batch(pad_id=0)
    assert_feature_matters(hf, ours, ids, mask, attn_sinks=False)
    assert_feature_matters(hf, ours, ids, mask, layer_windows=None)  # no sliding layers
    assert_feature_matters(hf, ours, ids, mask, layer_windows=(4, 4, 4))  # every layer sliding
    assert_feature_matters(hf, ours, ids, mask, rope_scaling=None)  # plain rope instead of YaRN
    assert_feature_matters(hf, ours, ids, mask, glu_limit=1e9)  # the clamp of the SwiGLU bites
    assert_feature_matters(hf, ours, ids, mask, experts_per_token=1)


def test_gpt_oss_yarn_matches_hf_with_the_real_parameters():
    config = tf.GptOssConfig()  # gpt-oss-20b's defaults: head_dim 64, theta 150000, YaRN factor 32
    assert {k: config.rope_parameters[k] for k in GPT_OSS_ROPE} == GPT_OSS_ROPE
    ours = gpt_oss_config(config.to_dict())
    inv_freq, factor = rope_frequencies(ours.dim_per_head, ours.rope_theta, ours.rope_scaling)
    ref, ref_factor = ROPE_INIT_FUNCTIONS["yarn"](config)
    assert torch.equal(inv_freq, ref) and factor == ref_factor
    assert factor == pytest.approx(0.1 * math.log(32) + 1)
    plain, _ = rope_frequencies(64, 150000.0)
    assert (inv_freq - plain).abs().max() > 1e-3  # YaRN changes the slow frequencies
    truncated = {**ours.rope_scaling, "truncate": True}
    config.rope_parameters["truncate"] = True
    assert torch.equal(rope_frequencies(64, 150000.0, truncated)[0], ROPE_INIT_FUNCTIONS["yarn"](config)[0])


def test_gpt_oss_refuses_what_it_cannot_run():
    config = tf.GptOssConfig(num_hidden_layers=2).to_dict()
    with pytest.raises(ValueError, match="quantized gpt-oss.*mxfp4"):
        gpt_oss_config(config | {"quantization_config": {"quant_method": "mxfp4"}})
    with pytest.raises(ValueError, match="swiglu_alpha 1.5"):
        gpt_oss_config(config | {"swiglu_alpha": 1.5})
    with pytest.raises(ValueError, match="layer_types.*chunked_attention"):
        gpt_oss_config(config | {"layer_types": ["chunked_attention", "full_attention"]})


# --- MixtureOfExperts against HF's blocks -------------------------------------------------------------------


@pytest.mark.parametrize("implementation", ["eager", "grouped_mm", "batched_mm"])
def test_mixture_of_experts_equals_mixtral_block(implementation):
    torch.manual_seed(0)
    config = tf.MixtralConfig(hidden_size=32, intermediate_size=24, num_local_experts=5, num_experts_per_tok=2)
    config._experts_implementation = implementation
    hf = MixtralSparseMoeBlock(config).eval()
    for p in hf.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ours = MixtureOfExperts(32, 24, 5, 2, "silu", "softmax_topk")
    ours.load_state_dict({"router.weight": hf.gate.weight, "gate_up": hf.experts.gate_up_proj,
                          "down": hf.experts.down_proj})
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        expected, got = hf(x), ours(x)
        _, weights, index = hf.gate(x.reshape(-1, 32))
        our_weights, our_index = ours.route(x.reshape(-1, 32))
    assert torch.equal(our_index, index) and (our_weights - weights).abs().max() <= 1e-7
    assert (got - expected).abs().max() <= 1e-6 * expected.abs().max()
    assert len(index.unique()) >= 4  # several experts really ran


@pytest.mark.parametrize("implementation", ["eager", "grouped_mm", "batched_mm"])
def test_mixture_of_experts_equals_gpt_oss_mlp(implementation):
    torch.manual_seed(0)
    config = tf.GptOssConfig(hidden_size=32, intermediate_size=24, num_local_experts=5, num_experts_per_tok=2,
                             swiglu_limit=0.5)
    config._experts_implementation = implementation
    hf = GptOssMLP(config).eval()
    for p in hf.parameters():
        torch.nn.init.normal_(p, std=0.3)
    e = hf.experts
    ours = MixtureOfExperts(32, 24, 5, 2, "silu", "topk_softmax", "clamped_swiglu", 0.5, bias=True)
    ours.load_state_dict({
        "router.weight": hf.router.weight, "router.bias": hf.router.bias,
        "gate_up": _deinterleaved(e.gate_up_proj).transpose(1, 2), "gate_up_bias": _deinterleaved(e.gate_up_proj_bias),
        "down": e.down_proj.transpose(1, 2), "down_bias": e.down_proj_bias})
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        expected, got = hf(x)[0], ours(x)
        h = x.reshape(-1, 32) @ e.gate_up_proj[0] + e.gate_up_proj_bias[0]
    assert (h.abs() > 0.5).float().mean() > 0.3  # the clamp at 0.5 bites on many entries
    assert (got - expected).abs().max() <= 1e-6 * expected.abs().max()
    unclamped = MixtureOfExperts(32, 24, 5, 2, "silu", "topk_softmax", "clamped_swiglu", 1e9, bias=True)
    unclamped.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (unclamped(x) - expected).abs().max() > 1e-2


# --- incremental decoding with our KV cache -----------------------------------------------------------------

N = 13  # tokens decoded
CACHED = {
    "phi3-longrope-short": phi3(original=16),  # 13 tokens stay within the short factors
    "phi3-window-partial": phi3(n_kv=1, original=16, partial=0.75, sliding_window=4),
    "mixtral-window": mixtral(sliding_window=4),
    "gpt-oss": gpt_oss(),
}


@pytest.mark.parametrize("family", CACHED)
@pytest.mark.parametrize("prompt", [1, 5, (5, 3)])
def test_decoding_with_the_cache_equals_a_full_pass(family, prompt):
    ours = build(reference(CACHED[family]))
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = ours(ids)
        logits, attentions = step_by_step(ours, ids, prompt)
    assert (logits - full.logits[0]).abs().max() <= HIDDEN_TOL
    assert (attentions - full.attentions[:, 0]).abs().max() <= ATTENTION_TOL
    assert attentions[:, :, -1].abs().sum() > 0  # the last step's rows are real
    if family == "gpt-oss":
        assert attentions.sum(-1).max() < 0.95  # sinks: cached steps keep their sink mass


def test_longrope_decoding_switches_factors_as_hf_does():
    """Crossing original_max_position_embeddings while decoding: HF keeps the cached keys rotated with the
    short factors and rotates later steps with the long ones (seq_len = last position + 1), and so do we,
    so a cached decode differs from a full pass on both sides, identically."""
    hf = reference(phi3(original=8))
    ours = build(hf)
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        logits, attentions = step_by_step(ours, ids, 5)
        cache, ref_logits, ref_rows = tf.DynamicCache(config=hf.config), [], []
        for start, end in [(0, 5)] + [(i, i + 1) for i in range(5, N)]:
            step = hf(input_ids=ids[:, start:end], cache=cache, use_cache=True, output_attentions=True)
            ref_logits.append(step.logits[0])
            ref_rows.append(torch.nn.functional.pad(torch.stack(step.attentions)[:, 0], (0, N - end)))
        full = ours(ids)
    assert (logits - torch.cat(ref_logits)).abs().max() <= HIDDEN_TOL
    assert (attentions - torch.cat(ref_rows, dim=2)).abs().max() <= ATTENTION_TOL
    assert (logits - full.logits[0]).abs().max() > CLEAR  # the switch is real


# --- load from a local folder through attnviz.load -----------------------------------------------------------

TEXT = "The keys to the cabinet are on the table, and the cat sat on the mat."


@pytest.mark.parametrize("family", ["phi3", "mixtral", "gpt_oss"])
def test_load_saved_folder(tmp_path, family):
    tokenizer = bpe_tokenizer(bos=True)
    vocab = tokenizer.get_vocab_size()
    configs = {
        "phi3": lambda: tf.Phi3ForCausalLM(tf.Phi3Config(
            vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=37, max_position_embeddings=64, original_max_position_embeddings=8, pad_token_id=1,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": SHORT,
                             "long_factor": LONG}, sliding_window=6)),
        "mixtral": lambda: tf.MixtralForCausalLM(tf.MixtralConfig(
            vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=24, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
            sliding_window=6)),
        "gpt_oss": lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
            vocab_size=vocab, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2,
            max_position_embeddings=131072, sliding_window=6, swiglu_limit=0.05,
            rope_parameters=dict(GPT_OSS_ROPE))),
    }
    hf = reference(configs[family])
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>").save_pretrained(tmp_path)
    model = attnviz.load(str(tmp_path), device="cpu")
    assert model.info.model_type == family and model.info.attention_kind == "GQA"
    trace = model.run(TEXT)
    ids = torch.tensor([trace.input_ids])
    assert ids.shape[1] > 8  # beyond the window and Phi-3's original context
    with torch.no_grad():
        ref = hf(input_ids=ids, output_attentions=True)
    reference_attn = torch.stack(ref.attentions)[:, 0].numpy()
    assert abs(trace.attentions - reference_attn).max() <= ATTENTION_TOL
    with torch.no_grad():
        logits = model.module.unembed(torch.as_tensor(trace.hidden)[None])[0]
    assert (logits - ref.logits[0]).abs().max() <= HIDDEN_TOL
    if family == "gpt_oss":  # the trace keeps the sink mass, not renormalised rows
        assert trace.attentions.sum(-1).max() < 0.95
