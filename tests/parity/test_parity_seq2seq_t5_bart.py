"""T5 (1.0 and v1.1/Flan) and BART on our encoder-decoder against HF eager, on tiny random configs.

Fed ids: encoder self-, decoder self- and cross-attentions <= 1e-5, hidden states and logits <= 1e-4, a
right-padded source batch; each family's feature switched off in our config (same weights) breaks parity;
KV-cache decoding equals the full pass; greedy decoding equals HF generate. Through `attnviz.load` with
real (tiny, built here offline) fast tokenizers: ids and offsets equal HF's, and `run(source,
target_text=...)` equals HF's teacher-forced pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnviz.loading import build_module
from attnviz.transformer.record import Recorder
from attnviz.transformer.relative import relative_position_bucket
from attnviz.transformer.seq2seq import EncoderDecoder
from tests.helpers.decoding import decode_step_by_step
from tests.helpers.seq2seq import (
    BART_BOS,
    BART_EOS,
    BART_PAD,
    T5_EOS,
    T5_PAD,
    VOCAB,
    bart_tokenizer,
    hf_bart,
    hf_t5,
    ours_from,
    t5_tokenizer,
)

ATTENTION_TOL, HIDDEN_TOL = 1e-5, 1e-4


def ids_batch(pad: int, eos: int, start: int, source: int = 13, target: int = 8):
    """Two rows, the second source padded on the right; sources longer than T5's max_distance 10."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, VOCAB, (2, source), generator=g)
    src[0, -1] = eos
    src[1, source - 4], src[1, source - 3:] = eos, pad
    tgt = torch.randint(3, VOCAB, (2, target), generator=g)
    tgt[:, 0] = start
    return src, (src != pad).long(), tgt


FAMILIES = {
    "t5-v1.1": (lambda: hf_t5(True), (T5_PAD, T5_EOS, T5_PAD)),
    "t5-1.0": (lambda: hf_t5(False), (T5_PAD, T5_EOS, T5_PAD)),
    "bart": (lambda: hf_bart(), (BART_PAD, BART_EOS, BART_EOS)),
    "bart-scaled": (lambda: hf_bart(scale_embedding=True), (BART_PAD, BART_EOS, BART_EOS)),
}


def compare(hf, ours, src, mask, tgt) -> dict[str, float]:
    """Largest absolute difference per output."""
    with torch.no_grad():
        ref = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True,
                 output_hidden_states=True)
        out = ours(src, tgt, attention_mask=mask)
    real = mask.bool()
    diffs = {
        "encoder_attentions": (out.encoder_attentions - torch.stack(ref.encoder_attentions)).abs().max().item(),
        "decoder_attentions": (out.decoder_attentions - torch.stack(ref.decoder_attentions)).abs().max().item(),
        "cross_attentions": (out.cross_attentions - torch.stack(ref.cross_attentions)).abs().max().item(),
        # padded source positions' hidden states are never read (cross-attention masks them)
        "encoder_hidden": (out.encoder_hidden - ref.encoder_last_hidden_state)[real].abs().max().item(),
        "decoder_hidden": (out.hidden - ref.decoder_hidden_states[-1]).abs().max().item(),
        "logits": (out.logits - ref.logits).abs().max().item(),
    }
    assert out.cross_attentions.shape[-2:] == (tgt.shape[1], src.shape[1])
    return diffs


def within_tolerance(diffs: dict[str, float]) -> bool:
    return all(v <= (ATTENTION_TOL if k.endswith("attentions") else HIDDEN_TOL) for k, v in diffs.items())


@pytest.mark.parametrize("family", list(FAMILIES))
def test_parity_with_hf_eager(family):
    make, special = FAMILIES[family]
    hf = make()
    ours = ours_from(hf)
    diffs = compare(hf, ours, *ids_batch(*special))
    assert within_tolerance(diffs), diffs


def test_t5_configs_read_as_their_variants():
    v11, v10 = ours_from(hf_t5(True)).config, ours_from(hf_t5(False)).config
    assert (v11.gated_mlp, v11.tie_word_embeddings, v11.logits_scale, v11.activation) == (True, False, 1.0, "gelu_tanh")
    assert (v10.gated_mlp, v10.tie_word_embeddings, v10.activation) == (False, True, "relu")
    assert v10.logits_scale == pytest.approx(32 ** -0.5)
    assert (v11.head_dim, v11.attn_scale, v11.positions, v11.norm_placement, v11.bias) == (6, 1.0, "relative", "pre",
                                                                                           False)
    with pytest.raises(ValueError, match="feed_forward_proj"):
        build_module({**hf_t5(True).config.to_dict(), "feed_forward_proj": "gelu-gated-x"}, {})


def switched(ours: EncoderDecoder, **changes) -> EncoderDecoder:
    """Our model with the same weights and a config field changed (weights the change drops are left out)."""
    other = EncoderDecoder(dataclasses.replace(ours.config, **changes)).eval()
    state = {k: v for k, v in ours.state_dict().items() if k in other.state_dict()}
    other.load_state_dict(state, strict=False)
    missing = set(other.state_dict()) - set(state)
    assert missing <= {"positions"}, missing  # nothing the change adds is left at its init
    return other


def _off(ours, feature):
    if feature == "bucket bias":
        off = switched(ours)
        off.position_bias = lambda *args, **kwargs: None
        return off
    return switched(ours, **{
        "unscaled scores": dict(attn_scale=None),
        "gated MLP": dict(gated_mlp=False),
        "tied-head rescale": dict(logits_scale=1.0),
        "position offset": dict(position_offset=0, max_positions=ours.config.max_positions + 2),
        "layernorm_embedding": dict(embedding_norm=False),
    }[feature])


@pytest.mark.parametrize("family,feature,output", [
    ("t5-v1.1", "bucket bias", "encoder_attentions"),
    ("t5-v1.1", "bucket bias", "decoder_attentions"),
    ("t5-v1.1", "unscaled scores", "encoder_attentions"),
    ("t5-v1.1", "gated MLP", "encoder_hidden"),
    ("t5-1.0", "tied-head rescale", "logits"),
    ("bart", "position offset", "encoder_attentions"),
    ("bart", "layernorm_embedding", "encoder_hidden"),
])
def test_switching_the_feature_off_breaks_parity(family, feature, output):
    make, special = FAMILIES[family]
    hf = make()
    ours = ours_from(hf)
    batch = ids_batch(*special)
    assert within_tolerance(compare(hf, ours, *batch))
    diffs = compare(hf, _off(ours, feature), *batch)
    assert diffs[output] > 1e-2, (feature, diffs)


def test_relative_buckets_match_hf():
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-300, 301)[None, :].expand(3, -1)
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (8, 10), (16, 20)):
            theirs = T5Attention._relative_position_bucket(relative, bidirectional, buckets, distance)
            assert torch.equal(relative_position_bucket(relative, bidirectional, buckets, distance), theirs)


@pytest.mark.parametrize("family", ["t5-v1.1", "t5-1.0", "bart"])
def test_kv_cache_decoding_equals_full_forward(family):
    """One step at a time; T5's causal buckets for a cached step must use the query's real position."""
    make, special = FAMILIES[family]
    ours = ours_from(make())
    src, mask, tgt = (x[1:] for x in ids_batch(*special))  # the padded row: the cache takes target padding only
    full, stepped, _, record, cross = decode_step_by_step(ours, src, mask, tgt)
    assert (stepped - full.logits).abs().max().item() <= HIDDEN_TOL
    last_self, last_cross = record.stacked("attentions"), cross.stacked("attentions")  # L, 1, H, 1, T / S
    assert (last_self[..., 0, :] - full.decoder_attentions[..., -1, :]).abs().max().item() <= ATTENTION_TOL
    assert (last_cross[..., 0, :] - full.cross_attentions[..., -1, :]).abs().max().item() <= ATTENTION_TOL


@pytest.mark.parametrize("family", ["t5-v1.1", "t5-1.0", "bart"])
def test_greedy_matches_hf_generate(family):
    make, special = FAMILIES[family]
    hf = make()
    ours = ours_from(hf)
    if family == "bart":  # transformers 5 keeps it in the generation config (the loader reads that file)
        hf.generation_config.forced_bos_token_id = BART_BOS
        ours = build_module({**hf.config.to_dict(), "forced_bos_token_id": BART_BOS}, dict(hf.state_dict())).eval()
    src, mask, _ = ids_batch(*special)
    with torch.no_grad():  # HF's T5 cache is sized by num_layers, not num_decoder_layers: generate without it
        theirs = hf.generate(input_ids=src, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=10,
                             use_cache=False)
    mine = ours.greedy(src, 10, attention_mask=mask)
    assert mine.tolist() == theirs.tolist()
    if family == "bart":
        assert ours.config.forced_bos_token_id == BART_BOS and mine[:, 1].tolist() == [BART_BOS] * 2


def test_bart_without_model_prefix_and_refusals():
    hf = hf_bart()
    base = {k.removeprefix("model."): v for k, v in hf.state_dict().items() if k.startswith("model.")}
    ours = build_module(hf.config.to_dict(), base)  # BartModel's keys (no head, no final_logits_bias)
    assert torch.equal(ours.lm_head.weight, hf.model.shared.weight)
    with pytest.raises(ValueError, match="not consumed"):
        build_module(hf.config.to_dict(), {**dict(hf.state_dict()), "model.encoder.extra.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match="different widths"):
        build_module({**hf.config.to_dict(), "decoder_ffn_dim": 64}, dict(hf.state_dict()))


# --- Saved folders with real tokenizers through attnviz.load

TEXTS = ["translate English to German: The keys to the cabinet are on the table.",
         "The  keys,\tzebra!", "Der Schlüssel liegt auf dem Tisch.", "北京 is unknown here", "a"]


@pytest.fixture(scope="module", params=["t5", "bart"])
def folder(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    tokenizer = t5_tokenizer() if request.param == "t5" else bart_tokenizer()
    hf = (hf_t5 if request.param == "t5" else hf_bart)(vocab=len(tokenizer))
    tokenizer.save_pretrained(path)
    hf.save_pretrained(path)
    return request.param, path


def _hf_pair(path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), attn_implementation="eager", dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(str(path))


def test_tokenizer_ids_and_offsets_equal_hf(folder):
    import attnviz

    family, path = folder
    model = attnviz.load(str(path), device="cpu")
    _, reference = _hf_pair(path)
    for text in TEXTS:
        for target in (False, True):
            theirs = reference(text_target=text) if target else reference(text)
            offsets = reference(text, return_offsets_mapping=True)["offset_mapping"]
            mine = model.tokenizer.encode(text, target=target)
            assert mine.ids == theirs["input_ids"], (family, text)
            assert mine.offsets == [tuple(o) for o in offsets], (family, text)
    enc = model.tokenizer.encode(TEXTS[0], max_tokens=6)  # truncation keeps the specials, as HF's
    theirs = reference(TEXTS[0], truncation=True, max_length=6)["input_ids"]
    assert enc.truncated and enc.ids == theirs
    assert enc.special[-1] and (family == "t5" or enc.special[0])


def test_run_with_target_text_equals_hf(folder):
    import attnviz

    family, path = folder
    model = attnviz.load(str(path), device="cpu")
    hf, reference = _hf_pair(path)
    source, target = TEXTS[0], "Der Schlüssel liegt auf dem Tisch."
    trace = model.run(source, target_text=target)
    batch = reference(source, text_target=target, return_tensors="pt")
    with torch.no_grad():
        ref = hf(input_ids=batch["input_ids"], labels=batch["labels"], output_attentions=True)
    labels = batch["labels"][0].tolist()
    assert trace.labels == labels and trace.input_ids == batch["input_ids"][0].tolist()
    assert trace.target_input_ids == [model.config.decoder_start_token_id, *labels[:-1]]
    for name, theirs in (("attentions", ref.encoder_attentions), ("decoder_attentions", ref.decoder_attentions),
                         ("cross_attentions", ref.cross_attentions)):
        assert np.abs(getattr(trace, name) - torch.stack(theirs)[:, 0].numpy()).max() <= ATTENTION_TOL, name
    if family == "t5":  # the task prefix is part of the source the model reads: its words are words of the trace
        assert trace.words[:4] == ["translate", "English", "to", "German"]
    assert trace.target_words == ["Der", "Schlüssel", "liegt", "auf", "dem", "Tisch", "."]


def test_run_without_target_decodes_like_hf_generate(folder):
    import attnviz

    family, path = folder
    model = attnviz.load(str(path), device="cpu")
    hf, reference = _hf_pair(path)
    source = TEXTS[2]
    trace = model.run(source, max_new_tokens=8)
    batch = reference(source, return_tensors="pt")
    with torch.no_grad():
        generated = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=8, use_cache=False)[0].tolist()
    assert trace.generated
    ids = [model.config.decoder_start_token_id, *trace.labels]
    assert ids[: len(generated)] == generated
    assert trace.target_text == reference.decode(generated, skip_special_tokens=True)
    for token, (s, e), special in zip(trace.target_tokens, trace.target_offsets, trace.target_special_mask):
        assert special or s == e or trace.target_text[s:e] == token


# --- The query-key view's terms: content + T5's position bias = the recorded pre-softmax score. The
# Translate page has no query-key view, so this is checked at the analysis level (analysis.query_key with
# LoadedSeq2Seq.score_setup), on each attention kind.

@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_query_key_terms_sum_to_the_recorded_t5_scores(kind):
    from attnviz.analysis.query_key import query_key
    from attnviz.models.loaded_seq2seq import LoadedSeq2Seq, seq2seq_info

    module = ours_from(hf_t5(True))
    loaded = LoadedSeq2Seq(module, None, seq2seq_info(module, "tiny t5", "(test)", "t5", 64))
    src, mask, tgt = (x[:1] for x in ids_batch(T5_PAD, T5_EOS, T5_PAD))
    names = ("queries", "keys", "scores")
    records = {k: Recorder(*names) for k in ("encoder", "decoder", "cross")}
    with torch.no_grad():
        module(src, tgt, attention_mask=mask, encoder_record=records["encoder"], decoder_record=records["decoder"],
               cross_record=records["cross"])
    record = records[kind]
    for layer in (0, 1):  # the bias lives in layer 0's table and is added in every layer
        queries, keys = record.stacked("queries")[layer, 0], record.stacked("keys")[layer, 0]
        scores = record.stacked("scores")[layer, 0].double().numpy()  # H, T, S
        for head in (0, 3):
            setup = loaded.score_setup(layer, head, kind)
            assert setup["scale"] == 1.0 and setup["causal"] == (kind == "decoder")
            for position in (0, queries.shape[1] - 1):
                terms = loaded.score_terms(head, kind, position, queries.shape[1], keys.shape[1])
                assert list(terms) == ([] if kind == "cross" else ["bucket_bias"])
                view = query_key(queries.numpy(), keys.numpy(), module.kv_group, head, position, terms=terms or None,
                                 **setup)
                seen = view.visible
                assert np.allclose(view.products.sum(-1)[seen] + view.bias[seen], scores[head, position][seen],
                                   atol=1e-5)
                assert np.allclose(view.scores[seen], scores[head, position][seen], atol=1e-5)
                if kind != "cross":
                    assert np.abs(view.bias[seen]).max() > 1e-3  # the bias is a real term, not zeros


def test_t5_hub_layouts_of_the_head():
    """T5 1.0 files may carry lm_head.weight equal to shared.weight (tied: fine) or, broken, different (refused:
    the rescale belongs to a tied head); v1.1 files carry their own head, used as it is."""
    hf = hf_t5(False)
    state = dict(hf.state_dict())
    tied = build_module(hf.config.to_dict(), {**state, "lm_head.weight": state["shared.weight"].clone()})
    assert tied.lm_head.weight is tied.decoder_embedding.weight
    with pytest.raises(ValueError, match="differs from its shared embedding"):
        build_module(hf.config.to_dict(), {**state, "lm_head.weight": torch.randn_like(state["shared.weight"])})
    v11 = hf_t5(True)
    state = {k: v for k, v in v11.state_dict().items() if not k.startswith(("encoder.embed", "decoder.embed"))}
    ours = build_module(v11.config.to_dict(), state)  # shared + lm_head only, as the hub's flan-t5 files
    assert torch.equal(ours.lm_head.weight, v11.lm_head.weight)
    assert not torch.equal(ours.lm_head.weight, ours.decoder_embedding.weight)
