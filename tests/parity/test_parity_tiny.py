"""Exact parity with HF eager (float32) on tiny random models of every family, fed token ids.

Bounds (docs/architecture.md): attention probabilities <= 1e-5, final hidden states <= 1e-4 (and logits, for
decoders, <= 1e-4 too).
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from attnviz.loading import build_module

ATTENTION_TOL, HIDDEN_TOL = 1e-5, 1e-4
VOCAB = 99

ENCODERS = {
    "bert": lambda: tf.BertModel(tf.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)),
    "roberta": lambda: tf.RobertaModel(tf.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=64, type_vocab_size=1, pad_token_id=1)),
    "distilbert": lambda: tf.DistilBertModel(tf.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64)),
}


def llama_like(cls, config_cls, n_kv_heads, **extra):
    return lambda: cls(config_cls(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=n_kv_heads, intermediate_size=37, max_position_embeddings=128, **extra))


DECODERS = {
    "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "llama-mha": llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, 4),
    "llama-gqa": llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, 2),
    "llama-mqa": llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, 1),
    "llama-untied-bias-headdim": llama_like(
        tf.LlamaForCausalLM, tf.LlamaConfig, 2, head_dim=16, attention_bias=True, mlp_bias=True,
        tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
    "llama3-rope": llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, 2, rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "mistral": llama_like(tf.MistralForCausalLM, tf.MistralConfig, 2, sliding_window=None),
    "qwen2": llama_like(tf.Qwen2ForCausalLM, tf.Qwen2Config, 2),
}


def hf_model(factory):
    torch.manual_seed(0)
    model = factory()
    model.config._attn_implementation = "eager"
    with torch.no_grad():  # random init leaves some tensors (biases, norms) at 0/1: make every one count
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model.eval()


def batch(pad_id: int, pair: bool = False):
    """Two sequences, the second right-padded by 3; ids avoid the pad id."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    ids[1, -3:], mask[1, -3:] = pad_id, 0
    types = torch.zeros_like(ids)
    if pair:
        types[:, 5:] = 1
    return ids, mask, types


def assert_parity(ours, hf_attentions, hf_hidden, mask):
    ours_attn = ours.attentions
    ref_attn = torch.stack(hf_attentions)
    keep = mask.bool()  # padded query rows are meaningless; compare the real ones
    diff = (ours_attn - ref_attn).abs().transpose(2, 3)[:, keep]  # L, B, T, H, S -> L, N, H, S
    assert diff.max() <= ATTENTION_TOL, diff.max()
    hidden = (ours.hidden - hf_hidden).abs()[keep]
    assert hidden.max() <= HIDDEN_TOL, hidden.max()


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
