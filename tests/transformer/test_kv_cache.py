"""The KV cache (attnviz/transformer/kv_cache.py) measured: what MQA and GQA caches hold against MHA's, decoding
token by token against one full forward pass, and greedy decoding against Hugging Face's `generate`.

References: the full forward pass of the same module (itself checked against HF eager in
test_parity_tiny.py), and HF's own `generate` with greedy settings on the same weights.
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from attnviz.attention_kinds.decoding import greedy_decode
from attnviz.loading import build_module
from attnviz.transformer.attention import MultiHeadAttention
from attnviz.transformer.kv_cache import KVCache, LayerCache
from attnviz.transformer.masks import causal_mask
from attnviz.transformer.record import Recorder
from tests.helpers.decoding import step_by_step
from tests.helpers.tiny_hf import DECODERS, VOCAB, hf_model, llama_like

TOL = 1e-5
N = 13  # tokens decoded
# Mistral's sliding window of 4: a cached step must still see only the last 4 keys
FAMILIES = {**DECODERS, "mistral-window": llama_like(tf.MistralForCausalLM, tf.MistralConfig, 2, sliding_window=4)}


@pytest.mark.parametrize("n_kv, expected", [(8, 1), (2, 2 / 8), (1, 1 / 8)])
def test_cache_holds_k_over_h_of_mha(n_kv, expected):
    """After N tokens, a cache holds 2 * K * N * D floats per layer: MQA 1/H and GQA K/H of MHA."""
    torch.manual_seed(0)
    d_model, heads = 64, 8
    layers = [MultiHeadAttention(d_model, heads, n) for n in (heads, n_kv)]
    caches = [LayerCache(), LayerCache()]
    x = torch.randn(1, N, d_model)
    with torch.no_grad():
        for i in range(N):  # one token at a time, as decoding does
            for layer, cache in zip(layers, caches):
                layer(x[:, i:i + 1], cache=cache)
    mha, other = caches
    head_dim = d_model // heads
    assert mha.keys.numel() + mha.values.numel() == 2 * heads * N * head_dim  # by hand: 2 * 8 * 13 * 8
    assert other.keys.shape == (1, n_kv, N, head_dim) and other.values.shape == (1, n_kv, N, head_dim)
    ratio = (other.keys.numel() + other.values.numel()) / (mha.keys.numel() + mha.values.numel())
    assert ratio == expected
    assert other.nbytes == 2 * n_kv * N * head_dim * 4  # float32
    assert other.nbytes / mha.nbytes == expected


def test_model_cache_counts_every_layer():
    hf = hf_model(DECODERS["llama-gqa"])  # 2 layers, 4 heads, 2 KV heads, head dim 8
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    cache = KVCache(2)
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours(ids, cache=cache)
    assert cache.length == N
    assert cache.numel == 2 * 2 * (2 * N * 8)  # layers * (keys + values) * K * S * D
    assert cache.nbytes == cache.numel * 4


@pytest.mark.parametrize("family", ["llama-gqa", "llama-mqa", "llama3-rope", "gpt2", "mistral-window"])
@pytest.mark.parametrize("prompt", [1, 5, (5, 3)])
def test_decoding_with_the_cache_equals_a_full_pass(family, prompt):
    """Rotary (Llama, GQA/MQA) and learned positions (GPT-2): the cache must place each new token at
    its true position and let it see every earlier key (within the window, for Mistral's)."""
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = ours(ids)
        logits, attentions = step_by_step(ours, ids, prompt)
    assert (logits - full.logits[0]).abs().max() <= TOL
    assert (attentions - full.attentions[:, 0]).abs().max() <= TOL
    # the comparison is not vacuous: the rows are real distributions over the causal prefix
    assert torch.allclose(attentions.sum(-1), torch.ones(()), atol=1e-5)
    window = ours.config.sliding_window
    assert torch.all(attentions[..., ~causal_mask(N, window=window)] == 0)


def test_a_wrong_position_is_caught():
    """Decoding without the cache's offset (every step at position 0) must fail the comparison above."""
    hf = hf_model(DECODERS["llama-gqa"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(4))
    original = ours.positions
    ours.positions = lambda input_ids, past=0, attention_mask=None: original(input_ids, 0)
    with torch.no_grad():
        full = ours(ids)
        logits, _ = step_by_step(ours, ids, 1)
    assert (logits - full.logits[0]).abs().max() > 1e-3


def test_recorded_keys_are_the_cached_ones():
    """With a cache, the recorder sees every key so far (the cache's), not only this step's."""
    hf = hf_model(DECODERS["llama-gqa"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, VOCAB, (1, N), generator=torch.Generator().manual_seed(5))
    cache = KVCache(2)
    with torch.no_grad():
        full = ours(ids, record=Recorder("keys", "values"))
        ours(ids[:, :-1], cache=cache)
        last = ours(ids[:, -1:], cache=cache, record=Recorder("keys", "values"))
    for name in ("keys", "values"):
        assert (last.record.stacked(name) - full.record.stacked(name)).abs().max() <= TOL


@pytest.mark.parametrize("family", ["llama-gqa", "llama-mqa"])
def test_greedy_decoding_matches_hf_generate(family):
    hf = hf_model(DECODERS[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    prompt = torch.randint(3, VOCAB, (1, 6), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        ref = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, num_beams=1,
                          do_sample=False, eos_token_id=None, pad_token_id=0)
    cached = greedy_decode(ours, prompt, 20)
    uncached = greedy_decode(ours, prompt, 20, use_cache=False)
    assert ref.shape == (1, 26)
    assert cached.tolist() == ref.tolist()
    assert uncached.tolist() == ref.tolist()
    assert len(set(cached[0, 6:].tolist())) > 1  # not a degenerate repeat of one token


def test_greedy_decode_stops_at_eos_and_refuses_encoders():
    hf = hf_model(DECODERS["llama-gqa"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    prompt = torch.randint(3, VOCAB, (1, 6), generator=torch.Generator().manual_seed(6))
    first = greedy_decode(ours, prompt, 1)[0, -1].item()
    assert greedy_decode(ours, prompt, 20, eos_token_id=first).shape == (1, 7)
    config = tf.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                           intermediate_size=37)
    encoder = build_module(config.to_dict(), tf.BertModel(config).state_dict())
    with pytest.raises(ValueError, match="causal"):
        greedy_decode(encoder, prompt, 3)
