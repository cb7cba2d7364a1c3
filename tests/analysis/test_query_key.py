"""The query-key view (attnviz.analysis.query_key): its per-dimension products add up to the pre-softmax
score, and the softmax of those scores is the attention row, checked against Hugging Face's eager
attention on tiny random models (BERT; Llama with rotary and GQA) and against our own traces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.analysis.query_key import query_key
from attnviz.loading import build_module
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import DECODERS, ENCODERS, hf_model


@pytest.mark.parametrize("family", ["bert", "llama-gqa", "llama-mqa"])
def test_products_sum_to_the_score_and_softmax_is_hf_attention(family):
    factory = {**ENCODERS, **DECODERS}[family]
    hf = hf_model(factory)
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    causal = module.config.causal
    ids = torch.randint(3, 99, (1, 10), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref = hf(input_ids=ids, output_attentions=True).attentions  # HF eager: the independent reference
        out = module(ids, record=Recorder("queries", "keys", "scores"))
    queries, keys = out.record.stacked("queries")[:, 0].numpy(), out.record.stacked("keys")[:, 0].numpy()
    scores = out.record.stacked("scores")[:, 0].numpy()  # L, H, T, S with the additive mask
    assert keys.shape[1] == module.config.kv_heads  # keys stay per KV head: the view picks kv_group[h]
    for layer in range(module.config.n_layers):
        for head in range(module.config.n_heads):
            for position in range(ids.shape[1]):
                view = query_key(queries[layer], keys[layer], module.kv_group, head, position, causal=causal)
                assert view.kv_head == module.kv_group[head]
                seen = view.visible
                assert seen.sum() == (position + 1 if causal else ids.shape[1])
                sums = view.products.sum(axis=-1)
                np.testing.assert_allclose(sums[seen], view.scores[seen], atol=1e-12)
                np.testing.assert_allclose(view.positive + view.negative, sums, atol=1e-12)
                assert (view.positive >= 0).all() and (view.negative <= 0).all()
                np.testing.assert_allclose(view.scores[seen], scores[layer, head, position][seen], atol=1e-5)
                np.testing.assert_allclose(view.probabilities, ref[layer][0, head, position].numpy(), atol=1e-5)
                assert np.isnan(view.scores[~seen]).all() and (view.probabilities[~seen] == 0).all()


def test_queries_are_taken_after_rotary():
    """Without rotary the same products would not give HF's attention: the check above can fail."""
    hf = hf_model(DECODERS["llama-gqa"])
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, 99, (1, 8), generator=torch.Generator().manual_seed(6))
    inputs = {}
    module.blocks[0].attn.register_forward_pre_hook(lambda m, args: inputs.setdefault("x", args[0]))
    with torch.no_grad():
        ref = hf(input_ids=ids, output_attentions=True).attentions[0][0].numpy()
        module(ids)
        attn = module.blocks[0].attn
        q = attn.q_proj(inputs["x"]).view(1, 8, attn.n_heads, attn.head_dim).transpose(1, 2)[0].numpy()
        k, _ = attn.project_kv(inputs["x"])
    unrotated = query_key(q, k[0].numpy(), module.kv_group, 1, 7, causal=True)
    assert not np.allclose(unrotated.probabilities, ref[1, 7], atol=1e-3)


def test_bad_arguments_are_value_errors():
    q, k = np.zeros((4, 3, 8)), np.zeros((2, 3, 8))
    with pytest.raises(ValueError, match="head 4"):
        query_key(q, k, [0, 0, 1, 1], 4, 0)
    with pytest.raises(ValueError, match="query position 3"):
        query_key(q, k, [0, 0, 1, 1], 0, 3)
    with pytest.raises(ValueError, match="kv_group has 2"):
        query_key(q, k, [0, 1], 0, 0)
    with pytest.raises(ValueError, match="queries must be"):
        query_key(q, np.zeros((2, 3, 4)), [0, 0, 1, 1], 0, 0)


def test_one_layer_recording_of_a_real_model_gives_the_trace_rows(smollm):
    """SmolLM2 (Llama, rotary, 9 query heads on 3 KV heads): the recorded layer's queries and keys give
    the attention rows of `model.run`."""
    text = "The keys to the cabinet are on the table."
    trace = smollm.run(text)
    layer = 17
    recorded = smollm.record(text, names=("queries", "keys"), layer=layer)
    assert recorded["queries"].shape == (9, len(trace.tokens), 64) and recorded["keys"].shape[0] == 3
    for head in (0, 4, 8):
        for position in (0, len(trace.tokens) // 2, len(trace.tokens) - 1):
            view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, head, position, causal=True)
            np.testing.assert_allclose(view.probabilities, trace.attentions[layer, head, position], atol=1e-5)


def test_encoder_recording_gives_the_trace_rows(minilm):
    text = "The animal didn't cross the street."
    trace = minilm.run(text)
    recorded = minilm.record(text, names=("queries", "keys"), layer=3)
    for head in range(12):
        view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, head, 2)
        np.testing.assert_allclose(view.probabilities, trace.attentions[3, head, 2], atol=1e-5)
