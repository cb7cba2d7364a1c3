"""Parity on real pretrained weights, offline: all-MiniLM-L6-v2 (BERT) and SmolLM2-135M (GGUF, GQA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.loading import hf
from attnviz.reference.parity import check_parity

SENTENCES = [
    "The keys to the cabinet are on the table.",
    "The animal didn't cross the street because it was too tired 😀🐶!",
    'Click <a href="javascript:alert(1)">here</a> or <script>x()</script> & <b>bold</b>.',
]
CHINESE = ["小明告诉老师他生病了。", "桌子上的钥匙不见了，妈妈很着急。"]


@pytest.fixture(scope="module")
def minilm_reference(minilm):
    return hf.reference_model(minilm.info.path)


@pytest.mark.parametrize("text", SENTENCES)
def test_minilm_matches_hf(minilm, minilm_reference, text):
    report = check_parity(minilm, text, reference=minilm_reference)
    assert report.max_attention_diff <= 1e-5 and report.max_hidden_diff <= 1e-4, report


def test_minilm_sentence_pair_matches_hf(minilm, minilm_reference):
    report = check_parity(minilm, SENTENCES[0], "They are mine.", reference=minilm_reference)
    assert report.passed(), report


@pytest.mark.parametrize("text", SENTENCES + CHINESE)
def test_smollm_matches_hf(smollm, smollm_reference, text):
    report = check_parity(smollm, text, reference=smollm_reference)
    assert report.passed(), report


def test_model_facts(minilm, smollm):
    assert (minilm.info.n_layers, minilm.info.n_heads, minilm.info.attention_kind) == (6, 12, "MHA")
    assert (smollm.info.n_layers, smollm.info.n_heads, smollm.info.n_kv_heads) == (30, 9, 3)
    assert smollm.info.attention_kind == "GQA" and smollm.info.max_tokens == 512
    trace = smollm.run("Hello there")
    assert trace.kv_group == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_trace_fields_follow_the_text(minilm):
    text, pair = "The keys are here.", "They are mine."
    trace = minilm.run(text, pair)
    assert trace.tokens[0] == "[CLS]" and trace.tokens.count("[SEP]") == 2
    assert trace.attentions.dtype == np.float32 and trace.attentions.shape == (6, 12, 12, 12)
    for token, (start, end), seq in zip(trace.tokens, trace.offsets, trace.sequence_ids):
        if seq is not None:
            assert token == (text, pair)[seq][start:end]
        else:
            assert (start, end) == (0, 0)
    assert trace.words == ["The", "keys", "are", "here", ".", "They", "are", "mine", "."]
    assert trace.word_of_token == [None, 0, 1, 2, 3, 4, None, 5, 6, 7, 8, None]
    np.testing.assert_allclose(trace.attentions.sum(-1), 1, atol=1e-5)


def test_cjk_labels_are_whole_characters(smollm):
    """Byte-level BPE splits a Han character over several tokens; each shows the character, never bytes."""
    text = CHINESE[0] + " 😀"
    trace = smollm.run(text)
    for token, (start, end) in zip(trace.tokens, trace.offsets):
        assert token == text[start:end] and token.strip()
        assert "\ufffd" not in token and "Ã" not in token and "ð" not in token
    assert trace.words[:4] == ["小明", "告诉", "老师", "他"]  # jieba's words (docs/api.md, word rule)
    assert all(w is not None for w in trace.word_of_token)
    causal = trace.attentions[0, 0]
    assert np.all(np.triu(causal, 1) == 0)


def test_truncation_is_reported(minilm):
    trace = minilm.run("word " * 1000)
    assert trace.truncated and len(trace.tokens) == 512 and trace.tokens[-1] == "[SEP]"
    assert not minilm.run("short").truncated


def test_decoder_rejects_text_pair_and_empty_text(smollm, minilm):
    with pytest.raises(ValueError, match="encoder"):
        smollm.run("a", "b")
    with pytest.raises(ValueError, match="empty"):
        minilm.run("   ")


def test_batch_equals_single_runs(minilm, smollm):
    for model in (minilm, smollm):
        texts = ["A short one.", "A much longer sentence with many more words in it, to force padding."]
        batched = model.run_batch(texts)
        for text, trace in zip(texts, batched):
            single = model.run(text)
            assert trace.tokens == single.tokens
            np.testing.assert_allclose(trace.attentions, single.attentions, atol=1e-5)


def test_next_token_predictions(smollm):
    trace = smollm.run("The capital of France is")
    top = smollm.next_tokens(trace, len(trace.tokens) - 1)
    assert len(top) == 5 and top[0][1] >= top[-1][1]
    assert "Paris" in top[0][0]


@pytest.mark.slow
def test_run_calls_no_transformers_code(minilm, smollm, monkeypatch):
    """After loading, model.run touches no transformers module: every forward is patched to raise."""
    import transformers

    def forbidden(*args, **kwargs):
        raise AssertionError("transformers was called at run time")

    for name in dir(transformers):
        if name.endswith(("Model", "ForCausalLM", "LMHeadModel", "ForMaskedLM", "Tokenizer", "TokenizerFast")):
            cls = getattr(transformers, name, None)
            for method in ("forward", "__call__", "encode", "_encode_plus", "_batch_encode_plus"):
                if isinstance(cls, type) and method in vars(cls):
                    monkeypatch.setattr(cls, method, forbidden)
    monkeypatch.setattr(torch.nn.Module, "__call__", _guarded_module_call(torch.nn.Module.__call__))
    for model in (minilm, smollm):
        trace = model.run("Still works, with transformers switched off.")
        assert trace.attentions.shape[0] == model.info.n_layers


def _guarded_module_call(original):
    def call(self, *args, **kwargs):
        if type(self).__module__.startswith("transformers"):
            raise AssertionError(f"transformers module {type(self).__name__} was called at run time")
        return original(self, *args, **kwargs)

    return call
