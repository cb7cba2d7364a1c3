"""ModernBERT, DeBERTa-v2/v3, ELECTRA and ALBERT against HF eager (float32) on tiny random configs (issue 18),
and the masked-LM heads of these families and DistilBERT's.

Bounds as tests/parity/test_parity_tiny.py: attentions <= 1e-5, hidden states <= 1e-4 (masked-LM logits <= 1e-4),
on a right-padded batch, with sentence pairs (token types) where the family has them. Each special feature
(ModernBERT's local band and two rotary bases, DeBERTa's c2p/p2c terms, log buckets and relative-embedding
norm, the factorised embeddings of ELECTRA and ALBERT, ALBERT's shared layer) has a tiny config where it
matters, and a check that our model with the feature switched off (same weights) FAILS parity by a clear
margin. The references are HF's modeling_modernbert / modeling_deberta_v2 / modeling_electra /
modeling_albert / modeling_distilbert with eager attention.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import transformers as tf

import attnviz
from attnviz.analysis.query_key import query_key
from attnviz.interventions import ablation
from attnviz.loading import build_module
from attnviz.models import inputs
from attnviz.readouts import predictions, preference
from attnviz.transformer.deberta import relative_index
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import ATTENTION_TOL, HIDDEN_TOL, VOCAB, assert_parity, batch, hf_model
from tests.helpers.tiny_tokenizers import encoder_tokenizer

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


def gap(hf, ours, pair=False, pad=0, zero=(), **changes) -> float:
    """How far our model misses HF's attentions with `changes` made to our config (same weights; the
    parameters named in `zero`, which the changed model has and ours lacks, are zeros)."""
    module = Transformer(dataclasses.replace(ours.config, **changes)).eval()
    _, unexpected = module.load_state_dict(ours.state_dict(), strict=False)
    with torch.no_grad():
        for name in zero:
            module.get_parameter(name).zero_()
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


# --- DeBERTa-v2/v3 ---------------------------------------------------------------------------------------

# v3's layout (microsoft/deberta-v3-base): no absolute positions, log buckets, shared keys, a normed table.
V3 = dict(relative_attention=True, pos_att_type=["p2c", "c2p"], position_biased_input=False, position_buckets=8,
          max_relative_positions=32, share_att_key=True, norm_rel_ebd="layer_norm", type_vocab_size=2)
# v2's older layout: absolute positions too, separate position projections, exact distances clamped at 5.
V2 = dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=True, position_buckets=-1,
          max_relative_positions=5, share_att_key=False, norm_rel_ebd="none", type_vocab_size=2)


def deberta(layout, masked_lm=False, **extra):
    cls = tf.DebertaV2ForMaskedLM if masked_lm else tf.DebertaV2Model
    options = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64, pad_token_id=0, **layout)
    options.update(extra)
    return lambda: cls(tf.DebertaV2Config(**options))


def test_deberta_v3_matches_hf_on_padded_pairs():
    hf = hf_model(deberta(V3))
    ours = check(hf, pair=True)
    c = ours.config
    assert c.max_positions is None and ours.position_embedding is None
    assert c.relative_span == 8 and c.attn_scale == pytest.approx((8 * 3) ** -0.5)
    # Content only, same 1/sqrt(3D) (a zero absolute table stands in for "no positions" to pass validation).
    assert gap(hf, ours, pair=True, pos_att_type=(), max_positions=64, zero=["position_embedding.weight"]) > CLEAR
    assert gap(hf, ours, pair=True, pos_att_type=("c2p",)) > CLEAR
    assert gap(hf, ours, pair=True, position_buckets=0) > CLEAR  # exact distances instead of log buckets
    assert gap(hf, ours, pair=True, norm_rel_ebd=False) > CLEAR


def test_deberta_v2_separate_position_projections_and_clamped_distances_match_hf():
    hf = hf_model(deberta(V2))
    with torch.no_grad():  # an un-normed table of init scale (0.02) barely moves a score: make it count
        hf.encoder.rel_embeddings.weight.mul_(30)
    ours = check(hf, pair=True)
    assert ours.blocks[0].attn.pos_key_proj is not None and ours.position_embedding is not None
    index = relative_index(12, ours.config)  # distances of 5 and more share the table's end rows
    assert index[11, 0] == index[5, 0] == 9 and index[0, 11] == index[0, 5] == 0 and index[3, 3] == 5
    assert gap(hf, ours, pair=True, share_att_key=True) > CLEAR  # content projections for the positions


@pytest.mark.parametrize("legacy", [True, False])
def test_deberta_v2_mlm_heads_equal_hf_logits(legacy):
    hf = hf_model(deberta(V3, masked_lm=True, legacy=legacy))
    hf.config.architectures = ["DebertaV2ForMaskedLM"]
    ours = check(hf, pair=True)
    assert ours.mlm_head is not None
    mlm_logits_match(hf, ours, pair=True)


# v1's layout (microsoft/deberta-base): fused per-head in_proj, q/v biases, distances clamped at 5 here.
V1 = dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=False, max_relative_positions=5,
          type_vocab_size=2)


def deberta_v1(masked_lm=False, **extra):
    cls = tf.DebertaForMaskedLM if masked_lm else tf.DebertaModel
    options = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64, pad_token_id=0, **V1)
    options.update(extra)
    return lambda: cls(tf.DebertaConfig(**options))


def test_deberta_v1_fused_in_proj_and_biases_match_hf_on_padded_pairs():
    hf = hf_model(deberta_v1())
    with torch.no_grad():
        hf.encoder.rel_embeddings.weight.mul_(30)  # as for v2: an un-normed table must count
    state = dict(hf.state_dict())
    state["embeddings.position_embeddings.weight"] = torch.zeros(64, 32)  # stored unused by deberta-base
    ours = build_module(hf.config.to_dict(), state).eval()
    ref, out, mask = run_both(hf, ours, True)
    assert_parity(out, ref.attentions, ref.last_hidden_state, mask)
    assert ours.config.family == "deberta" and ours.config.relative_span == 5
    assert gap(hf, ours, pair=True, pos_att_type=("p2c",)) > CLEAR
    assert gap(hf, ours, pair=True, pos_att_type=("c2p",)) > CLEAR


@pytest.mark.parametrize("legacy", [True, False])
def test_deberta_v1_mlm_heads_equal_hf_logits(legacy):
    hf = hf_model(deberta_v1(masked_lm=True, legacy=legacy))
    hf.config.architectures = ["DebertaForMaskedLM"]
    ours = check(hf, pair=True)
    mlm_logits_match(hf, ours, pair=True)


def test_deberta_score_terms_sum_to_the_recorded_scores():
    hf = hf_model(deberta(V3))
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.arange(3, 15)[None]
    with torch.no_grad():
        out = ours(ids, record=Recorder("scores", "score_terms", "attentions"))
    terms, scores = out.record.stacked("score_terms"), out.record.stacked("scores")  # L, B, 3, H, T, S
    assert terms.shape[:3] == (2, 1, 3)
    assert (terms.sum(dim=2) - scores).abs().max() <= 1e-5
    assert terms[:, :, 1].abs().max() > 0.01 and terms[:, :, 2].abs().max() > 0.01
    assert (torch.softmax(scores, -1) - out.attentions).abs().max() <= 1e-6


# --- ELECTRA ---------------------------------------------------------------------------------------------


def electra(masked_lm=False, embedding_size=16, **extra):
    cls = tf.ElectraForMaskedLM if masked_lm else tf.ElectraModel
    options = dict(vocab_size=VOCAB, embedding_size=embedding_size, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
                   pad_token_id=0)
    options.update(extra)
    return lambda: cls(tf.ElectraConfig(**options))


@pytest.mark.parametrize("embedding_size", [16, 32])
def test_electra_discriminator_matches_hf_on_padded_pairs(embedding_size):
    hf = hf_model(electra(embedding_size=embedding_size))
    ours = check(hf, pair=True)
    assert (ours.embedding_project is not None) == (embedding_size != 32)
    assert ours.token_embedding.weight.shape == (VOCAB, embedding_size)


def test_electra_generator_mlm_head_equals_hf_logits():
    hf = hf_model(electra(masked_lm=True, hidden_act="gelu_new"))  # the head's gelu is not hidden_act's
    hf.config.architectures = ["ElectraForMaskedLM"]
    ours = check(hf, pair=True)
    assert ours.mlm_head is not None and ours.mlm_head.decoder.weight is ours.token_embedding.weight
    mlm_logits_match(hf, ours, pair=True)


# --- ALBERT ----------------------------------------------------------------------------------------------


def albert(masked_lm=False, **extra):
    cls = tf.AlbertForMaskedLM if masked_lm else tf.AlbertModel
    options = dict(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64, type_vocab_size=2, pad_token_id=0)
    options.update(extra)
    return lambda: cls(tf.AlbertConfig(**options))


def test_albert_matches_hf_with_one_shared_layer_on_padded_pairs():
    hf = hf_model(albert())
    ours = check(hf, pair=True)
    assert len(ours.blocks) == 3 and ours.blocks[0] is ours.blocks[2]
    n_params = sum(p.numel() for p in ours.parameters())
    assert n_params == sum(p.numel() for p in hf.parameters()) - sum(p.numel() for p in hf.pooler.parameters())
    # Head ablation stays per layer: switching head 1 off in layer 2 only changes layer 2's output onward.
    ids = torch.arange(3, 15)[None]
    mask = torch.ones(3, 4)
    mask[2, 1] = 0
    with torch.no_grad():
        plain, ablated = ours(ids, record=Recorder("attentions", "head_outputs")), ours(
            ids, head_mask=mask, record=Recorder("attentions", "head_outputs"))
    assert torch.equal(plain.attentions[:3], ablated.attentions[:3])
    outputs = ablated.record.stacked("head_outputs")
    assert outputs.shape[0] == 3 and torch.all(outputs[2, 0, 1] == 0) and outputs[1, 0, 1].abs().max() > 0


def test_albert_mlm_head_equals_hf_logits():
    hf = hf_model(albert(masked_lm=True))
    hf.config.architectures = ["AlbertForMaskedLM"]
    ours = check(hf, pair=True)
    assert ours.mlm_head.dense.out_features == 16
    mlm_logits_match(hf, ours, pair=True)


# --- DistilBERT's masked-LM head -------------------------------------------------------------------------


def test_distilbert_mlm_head_equals_hf_logits():
    hf = hf_model(lambda: tf.DistilBertForMaskedLM(tf.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64,
        activation="relu")))
    hf.config.architectures = ["DistilBertForMaskedLM"]
    ours = check(hf)
    assert ours.mlm_head is not None and ours.mlm_head.decoder.weight is ours.token_embedding.weight
    mlm_logits_match(hf, ours)


# --- the real path: a saved folder through attnviz.load, with a tokenizer ---------------------------------

MASKED_LM = {
    "modernbert": (tf.ModernBertForMaskedLM, lambda v: modernbert(masked_lm=True, vocab_size=v, pad_token_id=2)),
    "deberta-v2": (tf.DebertaV2ForMaskedLM, lambda v: deberta(V3, masked_lm=True, legacy=False, vocab_size=v,
                                                           pad_token_id=0)),
    "electra": (tf.ElectraForMaskedLM, lambda v: electra(masked_lm=True, vocab_size=v, pad_token_id=2)),
    "albert": (tf.AlbertForMaskedLM, lambda v: albert(masked_lm=True, vocab_size=v, pad_token_id=0)),
    "distilbert": (tf.DistilBertForMaskedLM, lambda v: lambda: tf.DistilBertForMaskedLM(tf.DistilBertConfig(
        vocab_size=v, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64, pad_token_id=2))),
}


def unigram_tokenizer():
    """A SentencePiece-style tokenizer (Unigram model, Metaspace "▁" pre-tokenizer) trained here on the test
    corpus, with [CLS] $A [SEP] as DeBERTa-v3's and ALBERT's tokenizers frame a text."""
    from tokenizers import SentencePieceUnigramTokenizer, processors

    from tests.helpers.tiny_tokenizers import CORPUS

    trainer = SentencePieceUnigramTokenizer()
    trainer.train_from_iterator(CORPUS, vocab_size=200, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"],
                                unk_token="[UNK]", show_progress=False)
    tokenizer = trainer._tokenizer
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return tokenizer


@pytest.mark.parametrize("family", MASKED_LM)
def test_masked_lm_loads_from_a_saved_folder_and_fills_masks_as_hf(family, tmp_path):
    """save_pretrained (safetensors, the tied decoder left out) + a tokenizer of the family's kind trained
    here (SentencePiece-style Unigram for DeBERTa-v3 and ALBERT, byte-level BPE with BERT's special tokens
    for the others: no hub access) -> attnviz.load: the attentions of a real text equal HF's, the [MASK]
    fill and the minimal pairs' pseudo-log-likelihood run on the loaded head."""
    cls, factory = MASKED_LM[family]
    tokenizer = unigram_tokenizer() if family in ("deberta-v2", "albert") else encoder_tokenizer()
    hf = hf_model(factory(tokenizer.get_vocab_size()))
    hf.config.architectures = [cls.__name__]
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]",
                               pad_token="[PAD]", mask_token="[MASK]").save_pretrained(tmp_path)
    model = attnviz.load(str(tmp_path), device="cpu")
    assert model.info.mlm_head and inputs.has_mlm_head(model)
    if family != "deberta-v2":  # one q.k term: the query-key view needs no split
        assert model.score_term_names(0) == () and model.score_terms("The cat.", 0, 0, 0) == {}
    ids, position = predictions.mask_ids(model, "The keys to the [MASK] are on the table.")
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor([ids]), output_attentions=True)
    attentions = model.run_ids([ids])[0]  # L, H, T, T
    assert abs(attentions - torch.stack(ref.attentions)[:, 0].numpy()).max() <= ATTENTION_TOL
    top = predictions.mask_fill_top_k(model, "The keys to the [MASK] are on the table.", k=3)
    expected = torch.log_softmax(ref.logits[0, position].double(), -1).topk(3)
    assert [p.id for p in top] == expected.indices.tolist()
    assert [p.logprob for p in top] == pytest.approx(expected.values.tolist(), abs=1e-4)
    pair = preference.pair_from_texts("The keys to the cabinet are here.", "The keys to the cabinet is here.")
    result = preference.pair_preference(model, pair)
    assert result.method == "masked" and np.isfinite(result.good) and np.isfinite(result.bad)
    # The importance scan (layer-by-layer reruns with one head off per batch row) agrees with one ablation.
    text = "The keys to the [MASK] are on the table."
    grid = ablation.importance_scan(model, text, "mask_fill")
    best = top[0]
    off = predictions.mask_fill_top_k(model, text, predictions.head_mask_of(model, [(1, 2)]), k=model.config.vocab_size)
    after = next(p.logprob for p in off if p.id == best.id)
    assert grid.shape == (model.config.n_layers, 4) and grid[1, 2] == pytest.approx(best.logprob - after, abs=1e-4)


def test_deberta_query_key_view_splits_the_score_into_c2c_c2p_p2c(tmp_path):
    """The query-key view on a loaded DeBERTa-v3: q.k (c2c) plus the c2p and p2c terms the model recorded
    give the recorded pre-softmax score and the attention row of every query."""
    tokenizer = encoder_tokenizer()
    hf = hf_model(deberta(V3, vocab_size=tokenizer.get_vocab_size(), pad_token_id=2))
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]",
                               pad_token="[PAD]", mask_token="[MASK]").save_pretrained(tmp_path)
    model = attnviz.load(str(tmp_path), device="cpu")
    text, layer, head = "The keys to the cabinet are on the table.", 1, 2
    assert model.score_term_names(layer) == ("c2c", "c2p", "p2c")
    rec = model.record(text, names=("queries", "keys", "scores", "attentions"), layer=layer)
    for query in range(rec["scores"].shape[1]):
        terms = model.score_terms(text, layer, head, query)
        assert abs(sum(terms.values()) - rec["scores"][head, query]).max() <= 1e-5
        view = query_key(rec["queries"], rec["keys"], model.module.kv_group, head, query,
                         terms={name: terms[name] for name in ("c2p", "p2c")}, **model.score_setup(layer, head))
        assert abs(view.products.sum(-1) - terms["c2c"]).max() <= 1e-5
        assert abs(view.scores - rec["scores"][head, query]).max() <= 1e-5
        assert abs(view.probabilities - rec["attentions"][head, query]).max() <= 1e-6
        assert set(view.terms) == {"c2p", "p2c"} and abs(view.bias).max() > 0.01


def test_the_query_key_view_on_the_page_shows_deberta_position_terms(tmp_path, monkeypatch):
    """Explore's query-key view on a loaded DeBERTa-v3 folder: one caption says what the green bar is,
    and positive + negative + position term = the score marker, whose softmax is the trace's row."""
    from streamlit.testing.v1 import AppTest

    from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, z_array

    tokenizer = encoder_tokenizer()
    folder = tmp_path / "tiny_deberta_v3"
    hf = hf_model(deberta(V3, vocab_size=tokenizer.get_vocab_size(), pad_token_id=2))
    hf.save_pretrained(folder)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]",
                               pad_token="[PAD]", mask_token="[MASK]").save_pretrained(folder)
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.text_input(key="model_custom").input(str(folder)).run()
    at.text_input(key="text").input("The keys to the cabinet are here.").run()
    assert_clean(at)
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(2).run()
    at.session_state["qk_open"] = True
    at.run()
    at.selectbox(key="qk_query").set_value(3).run()
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert "DeBERTa: the score is content→content" in captions
    diff = next(c.value for c in at.caption if "max difference" in c.value)
    assert float(diff.rsplit(" ", 1)[-1].rstrip(".")) < 5e-4  # against the app's float16 trace
    bars = chart(at, "qk_bars")["data"]
    assert len(bars) == 4  # positive, negative, the position terms, the score marker
    parts = sum(z_array({"z": bar["y"]}).astype(np.float64) for bar in bars[:3])
    assert np.abs(parts - z_array({"z": bars[3]["y"]}).astype(np.float64)).max() < 1e-4


# --- the hub's configs (their config.json keys, written here: no hub access) ----------------------------

MODERNBERT_BASE = {"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"], "vocab_size": 50368,
                   "hidden_size": 768, "num_hidden_layers": 22, "num_attention_heads": 12, "intermediate_size": 1152,
                   "max_position_embeddings": 8192, "global_attn_every_n_layers": 3, "local_attention": 128,
                   "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "norm_bias": False,
                   "norm_eps": 1e-05, "hidden_activation": "gelu", "pad_token_id": 50283}
DEBERTA_V3_BASE = {"model_type": "deberta-v2", "vocab_size": 128100, "hidden_size": 768, "num_hidden_layers": 12,
                   "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512,
                   "relative_attention": True, "position_buckets": 256, "norm_rel_ebd": "layer_norm",
                   "share_att_key": True, "pos_att_type": "p2c|c2p", "layer_norm_eps": 1e-7,
                   "max_relative_positions": -1, "position_biased_input": False, "type_vocab_size": 0,
                   "hidden_act": "gelu", "pad_token_id": 0}


def test_hub_configs_convert_as_their_papers_say():
    from attnviz.loading.registry import converter_for
    from attnviz.loading.size import parameter_count

    def ours(raw):
        model_type = raw["model_type"]
        hf_config = tf.AutoConfig.for_model(model_type, **{k: v for k, v in raw.items() if k != "model_type"})
        return converter_for(hf_config.to_dict()).config(hf_config.to_dict()), hf_config.to_dict()

    modern, modern_hf = ours(MODERNBERT_BASE)
    assert [modern.window(i) for i in range(6)] == [None, 128, 128, None, 128, 128]
    assert modern.rope_at(0) == (160000.0, None) and modern.rope_at(1) == (10000.0, None)
    assert modern.mlm_head == "gelu" and not modern.qkv_bias
    assert 149e6 < parameter_count(modern_hf) < 150e6  # ModernBERT-base: 149M with its tied head
    v3, v3_hf = ours(DEBERTA_V3_BASE)
    assert v3.pos_att_type == ("p2c", "c2p") and v3.relative_span == 256 and v3.max_relative_positions == 512
    assert v3.max_positions is None and v3.type_vocab_size is None and v3.norm_rel_ebd and v3.share_att_key
    assert v3.attn_scale == pytest.approx((64 * 3) ** -0.5)
    assert 183e6 < parameter_count(v3_hf) < 185e6  # deberta-v3-base: 86M backbone + 98M embedding
