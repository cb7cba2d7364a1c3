"""Exact parity with HF eager (float32) on tiny random models of every family, fed token ids.

Bounds (docs/numerics.md): attention probabilities <= 1e-5, final hidden states <= 1e-4 (and logits, for
decoders, <= 1e-4 too).
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from attnviz.loading import build_module
from tests.helpers.tiny_hf import DECODERS, ENCODERS, HIDDEN_TOL, VOCAB, assert_parity, batch, hf_model, llama_like


@pytest.mark.parametrize("family", ENCODERS)
def test_encoder_parity_padded_pairs(family):
    hf = hf_model(ENCODERS[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    pad = hf.config.pad_token_id
    ids, mask, types = batch(pad, pair=family == "bert")
    kwargs = {"token_type_ids": types} if family == "bert" else {}
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True, **kwargs)
        out = ours(ids, mask, types if family == "bert" else None)
    assert_parity(out, ref.attentions, ref.last_hidden_state, mask)


@pytest.mark.parametrize("family", DECODERS)
def test_decoder_parity_padded(family):
    hf = hf_model(DECODERS[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id=0)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
        out = ours(ids, mask)
    assert_parity(out, ref.attentions, base.last_hidden_state, mask)
    logits = (out.logits - ref.logits).abs()[mask.bool()]
    assert logits.max() <= HIDDEN_TOL, logits.max()
    assert ours.kv_group == [h // (4 // hf.config.to_dict().get("num_key_value_heads", 4)) for h in range(4)]


def test_mistral_sliding_window_matches_hf():
    hf = hf_model(llama_like(tf.MistralForCausalLM, tf.MistralConfig, 2, sliding_window=4))
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id=0)
    with torch.no_grad():
        ref = hf.base_model(input_ids=ids[:1], output_attentions=True)
        out = ours(ids[:1])
    assert_parity(out, ref.attentions, ref.last_hidden_state, mask[:1])
    assert torch.all(out.attentions[0, 0, :, 8, :5] == 0)  # outside the window of 4


def test_parity_test_can_fail():
    """A changed weight is caught: the comparison above is not vacuous."""
    hf = hf_model(DECODERS["llama-gqa"])
    state = dict(hf.state_dict())
    state["model.layers.0.self_attn.k_proj.weight"] = state["model.layers.0.self_attn.k_proj.weight"] * 1.01
    ours = build_module(hf.config.to_dict(), state).eval()
    ids, mask, _ = batch(pad_id=0)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
        out = ours(ids, mask)
    with pytest.raises(AssertionError):
        assert_parity(out, ref.attentions, base.last_hidden_state, mask)


def test_bfloat16_keeps_rope_in_float32_and_stays_close():
    """In bfloat16 the rotary frequencies stay float32 (as HF computes its angles); attention then differs
    from the float32 reference only by bfloat16 rounding (8-bit mantissa: bound 1e-2, not 1e-5)."""
    hf = hf_model(DECODERS["llama-gqa"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval().to(torch.bfloat16)
    assert ours.inv_freq.dtype == torch.float32
    ids = torch.randint(3, VOCAB, (1, 100), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = ours(ids)
        ref = hf.base_model(input_ids=ids, output_attentions=True)
    assert out.attentions.dtype == torch.bfloat16
    assert (out.attentions.float() - torch.stack(ref.attentions)).abs().max() <= 1e-2
