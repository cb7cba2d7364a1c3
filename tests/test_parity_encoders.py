"""ModernBERT, DeBERTa-v2/v3, ELECTRA and ALBERT against HF eager (float32) on tiny random configs (issue 18),
and the masked-LM heads of these families and DistilBERT's.

Bounds as tests/test_parity_tiny.py: attentions <= 1e-5, hidden states <= 1e-4 (masked-LM logits <= 1e-4),
on a right-padded batch, with sentence pairs (token types) where the family has them. Each special feature
(ModernBERT's local band and two rotary bases, DeBERTa's c2p/p2c terms, log buckets and relative-embedding
norm, the factorised embeddings of ELECTRA and ALBERT, ALBERT's shared layer) has a tiny config where it
matters, and a check that our model with the feature switched off (same weights) FAILS parity by a clear
margin. The references are HF's modeling_modernbert / modeling_deberta_v2 / modeling_electra /
modeling_albert / modeling_distilbert with eager attention.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers as tf

import attnviz
from attnviz.interventions import effects
from attnviz.loading import build_module
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import Recorder
from tests.test_effects import encoder_tokenizer
from tests.test_parity_tiny import ATTENTION_TOL, HIDDEN_TOL, VOCAB, assert_parity, batch, hf_model

CLEAR = 1e-3  # a switched-off feature must miss parity by at least this much


def run_both(hf, ours, pair: bool, pad: int = 0):
    ids, mask, types = batch(pad, pair=pair)
    kwargs = {"token_type_ids": types} if pair else {}
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True, **kwargs)
        out = ours(ids, mask, types if pair else None)
    return ref, out, mask


def base_hidden(ref):
    return ref.last_hidden_state if hasattr(ref, "last_hidden_state") else ref.hidden_states[-1]


def check(hf, pair=False, pad=0):
    """Our module from HF's config and state dict equals HF on the padded batch; returns it."""
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ref, out, mask = run_both(hf, ours, pair, pad)
    assert_parity(out, ref.attentions, base_hidden(ref), mask)
    return ours


def gap(hf, ours, pair=False, pad=0, **changes) -> float:
    """How far our model misses HF's attentions with `changes` made to our config (same weights)."""
    module = Transformer(dataclasses.replace(ours.config, **changes)).eval()
    missing, _ = module.load_state_dict(ours.state_dict(), strict=False)
    ref, out, mask = run_both(hf, module, pair, pad)
    keep = mask.bool()
    return float((out.attentions - torch.stack(ref.attentions)).abs().transpose(2, 3)[:, keep].max())


# --- ModernBERT ------------------------------------------------------------------------------------------


def modernbert(masked_lm=False, **extra):
    cls = tf.ModernBertForMaskedLM if masked_lm else tf.ModernBertModel
    options = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                   intermediate_size=24, max_position_embeddings=64, global_attn_every_n_layers=3,
                   local_attention=4, global_rope_theta=160000.0, local_rope_theta=10.0, pad_token_id=0,
                   bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
    options.update(extra)
    return lambda: cls(tf.ModernBertConfig(**options))


def test_modernbert_matches_hf_with_local_bands_and_two_rotary_bases():
    hf = hf_model(modernbert())
    ours = check(hf)
    c = ours.config
    assert [c.window(i) for i in range(4)] == [None, 4, 4, None]
    assert c.rope_at(0) == (160000.0, None) and c.rope_at(1) == (10.0, None)
    assert ours.blocks[0].attn_norm is None and ours.blocks[1].attn_norm is not None
    # Keys more than local_attention // 2 = 2 away get nothing on a local layer, something on a global one.
    assert torch.all(ours(torch.arange(3, 15)[None]).attentions[1, 0, :, 8, :6] == 0)
    assert gap(hf, ours, layer_windows=None) > CLEAR
    assert gap(hf, ours, local_rope_theta=None) > CLEAR
    # A default LayerNorm on the already normed embeddings is nearly the identity: a small but real miss.
    assert gap(hf, ours, first_attn_norm=True) > 10 * ATTENTION_TOL


def test_modernbert_with_biases_matches_hf():
    check(hf_model(modernbert(attention_bias=True, mlp_bias=True, norm_bias=True)))


def test_modernbert_mlm_head_equals_hf_logits():
    hf = hf_model(modernbert(masked_lm=True))
    hf.config.architectures = ["ModernBertForMaskedLM"]
    ours = check(hf)
    assert ours.mlm_head is not None and ours.mlm_head.decoder.weight is ours.token_embedding.weight
    mlm_logits_match(hf, ours)


def mlm_logits_match(hf, ours, pair=False):
    ids, mask, types = batch(0, pair=pair)
    kwargs = {"token_type_ids": types} if pair else {}
    with torch.no_grad():
        reference = hf(input_ids=ids, attention_mask=mask, **kwargs).logits
        logits = ours.mlm_head(ours(ids, mask, types if pair else None).hidden)
    diff = (logits - reference).abs()[mask.bool()]
    assert diff.max() <= HIDDEN_TOL, diff.max()
