"""attnviz.interventions.ablation against independent references: HF eager logits of tiny random GPT-2 and Llama models
(and BertForMaskedLM), a hand-patched forward pass, and the chain rule.

The tokenizer is a small byte-level BPE trained here on a few sentences (real merges such as " the",
so the prefix/continuation boundary is a real BPE boundary); the tiny HF models share its vocabulary.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

from attnviz.interventions import ablation
from attnviz.loading import build_module
from attnviz.models import batch_bytes, inputs
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.readouts import predictions
from tests.helpers import tiny_hf
from tests.helpers.tiny_hf import tiny_mlm
from tests.helpers.tiny_tokenizers import bpe_tokenizer, encoder_tokenizer


def tiny_decoder(family: str, bos: bool):
    return tiny_hf.tiny_decoder(family, bpe_tokenizer(bos), seed=0, intermediate_size=37,
                                max_position_embeddings=128, attention_bias=True)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request):
    # GPT-2's tokenizer adds no BOS, Llama's does: both boundary cases are exercised.
    return tiny_decoder(request.param, bos=request.param == "llama")


def hf_continuation_logprobs(hf, ids: list[int], first: int) -> list[float]:
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return [float(logprobs[t - 1, ids[t]]) for t in range(first, len(ids))]


# --- continuation log-probability ---------------------------------------------------------------------


@pytest.mark.parametrize("prefix, continuation", [
    ("The keys to the cabinet", " are on the table."),
    ("The cat sat on the", " mat"),
    ("The cat sat on the ", "mat"),  # trailing space in the prefix: BPE merges it into " mat"
    ("A dog ran in the pa", "rk"),  # a token straddles the boundary
    ("A dog", " ran"),  # this vocabulary writes " ran" as a lone space token, then "r", "an"
])
def test_continuation_logprob_equals_hf(decoder, prefix, continuation):
    model, hf = decoder
    total, per_token = predictions.continuation_logprob(model, prefix, continuation)
    ids = model.tokenizer.encode(prefix + continuation).ids
    first = len(ids) - len(per_token)
    reference = hf_continuation_logprobs(hf, ids, first)
    assert [lp for _, lp in per_token] == pytest.approx(reference, abs=1e-4)
    assert total == pytest.approx(sum(reference), abs=1e-4)
    assert "".join(text for text, _ in per_token).endswith(continuation.lstrip(" ")[-3:])


def test_boundary_rule_scores_the_continuations_tokens(decoder):
    model, _ = decoder
    tok = model.tokenizer
    # " mat" is one token of the trained vocabulary: the leading space belongs to the continuation.
    assert tok.token_to_id("Ġmat") is not None
    _, per_token = predictions.continuation_logprob(model, "The cat sat on the", " mat")
    assert [text for text, _ in per_token] == [" mat"]
    _, per_token = predictions.continuation_logprob(model, "The cat sat on the ", "mat")
    assert [text for text, _ in per_token] == [" mat"]  # the prefix's space goes with the merged token
    # A lone-space token (zero-width offsets once trimmed) goes with the side its space came from.
    _, per_token = predictions.continuation_logprob(model, "A dog", " ran")
    assert [text for text, _ in per_token] == [" ", "r", "an"]
    _, per_token = predictions.continuation_logprob(model, "A dog ", "ran")
    assert [text for text, _ in per_token] == ["r", "an"]
    # Scored ids are exactly the tail of the joint tokenisation, however the prefix alone would tokenise.
    ids, first = predictions.continuation_ids(model, "A dog ran in the pa", "rk")
    joint = tok.encode("A dog ran in the park").ids
    assert ids == joint
    assert tok.decode(ids[first:]).endswith("rk")
    assert not tok.decode(ids[:first]).endswith("pa")  # the straddling token is scored, not the prefix's


def test_chain_rule_over_a_clean_boundary(decoder):
    model, _ = decoder
    whole, _ = predictions.continuation_logprob(model, "The cat", " sat on the mat")
    part1, _ = predictions.continuation_logprob(model, "The cat", " sat on")
    part2, _ = predictions.continuation_logprob(model, "The cat sat on", " the mat")
    assert whole == pytest.approx(part1 + part2, abs=1e-4)


def test_continuation_errors():
    model, _ = tiny_decoder("gpt2", bos=False)
    with pytest.raises(ValueError, match="empty"):
        predictions.continuation_logprob(model, "The cat", "")
    with pytest.raises(ValueError, match="prefix is empty"):
        predictions.continuation_logprob(model, "", "The cat")  # no BOS: nothing predicts the first token
    with_bos, _ = tiny_decoder("llama", bos=True)
    total, per_token = predictions.continuation_logprob(with_bos, "", "The cat")  # the BOS predicts it
    assert len(per_token) >= 2 and np.isfinite(total)
    with pytest.raises(ValueError, match="limit"):
        predictions.continuation_logprob(model, "The cat " * 40, "sat")


def test_encoders_are_refused():
    from attnviz.loading.random_model import random_config, random_model

    encoder = random_model(random_config(n_layers=1, n_heads=2, d_model=16))
    with pytest.raises(ValueError, match="encoder"):
        predictions.continuation_logprob(encoder, "The", " cat")
    with pytest.raises(ValueError, match="encoder"):
        predictions.next_token_top_k(encoder, "The")


# --- head masks: nothing off, a whole layer off -------------------------------------------------------


def test_all_ones_mask_is_bit_identical_to_a_plain_run(decoder):
    model, _ = decoder
    ids = model.tokenizer.encode("The keys to the cabinet are").ids
    ones = torch.ones(model.config.n_layers, model.config.n_heads)
    plain = predictions.hidden_states(model, ids, None)
    assert torch.equal(predictions.hidden_states(model, ids, predictions.as_head_mask(model, ones)), plain)
    # One mask per row ([L, B, H]) against the same batch unmasked (a batch of 3 may round differently
    # from a batch of 1 in the matmuls, so a batch is compared with a batch).
    per_row = predictions.as_head_mask(model, ones[:, None].expand(-1, 3, -1))
    batched = predictions.hidden_states(model, ids, per_row, 3)
    assert torch.equal(batched, predictions.hidden_states(model, ids, None, 3))
    assert predictions.continuation_logprob(model, "The cat", " sat", ones) == predictions.continuation_logprob(
        model, "The cat", " sat")


def attention_replaced_by_bias(hf, layer: int):
    """A forward hook on HF's own attention module of `layer` that replaces its output by the output
    projection's bias at every position: the layer's attention contributes only that bias."""
    if isinstance(hf, tf.GPT2LMHeadModel):
        attn = hf.transformer.h[layer].attn
        bias = attn.c_proj.bias
    else:
        attn = hf.model.layers[layer].self_attn
        bias = attn.o_proj.bias
    assert bias is not None and bias.abs().max() > 0  # the test is about keeping a non-zero bias

    def hook(module, args, output):
        return (bias.expand_as(output[0]).clone(), *output[1:])

    return attn.register_forward_hook(hook)


@pytest.mark.parametrize("layer", [0, 1])
def test_whole_layer_off_equals_hf_with_that_layers_attention_replaced_by_its_bias(decoder, layer):
    model, hf = decoder
    prefix, continuation = "The keys to the cabinet", " are on the table."
    mask = np.ones((model.config.n_layers, model.config.n_heads))
    mask[layer] = 0
    _, ablated = predictions.continuation_logprob(model, prefix, continuation, mask)
    _, plain = predictions.continuation_logprob(model, prefix, continuation)
    ids = model.tokenizer.encode(prefix + continuation).ids
    first = len(ids) - len(ablated)
    handle = attention_replaced_by_bias(hf, layer)
    try:
        reference = hf_continuation_logprobs(hf, ids, first)
    finally:
        handle.remove()
    assert [lp for _, lp in ablated] == pytest.approx(reference, abs=1e-4)
    # ... and the comparison can fail: the ablation moved the numbers far beyond the tolerance.
    assert max(abs(a - p) for (_, a), (_, p) in zip(ablated, plain)) > 1e-2


def test_head_mask_shape_is_checked(decoder):
    model, _ = decoder
    with pytest.raises(ValueError, match="head_mask"):
        predictions.continuation_logprob(model, "The cat", " sat", np.ones((model.config.n_layers + 1, 4)))


# --- encoders: masked-LM head and sentence embedding --------------------------------------------------


@pytest.fixture(scope="module", params=["bert", "roberta"])
def mlm(request):
    tokenizer = encoder_tokenizer()
    hf = tiny_mlm(request.param, tokenizer)
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    info = ModelInfo.describe(module, f"tiny {request.param} MLM", "(test)", request.param, 60)
    return LoadedModel(module, tokenizer, info, {"pad_token": "[PAD]"}), hf


def test_mlm_head_logits_equal_hf(mlm):
    model, hf = mlm
    assert model.info.mlm_head and inputs.has_mlm_head(model)
    assert model.module.mlm_head.decoder.weight is model.module.token_embedding.weight  # tied
    ids, position = predictions.mask_ids(model, "The keys to the [MASK] are on the table.")
    with torch.no_grad():
        reference = hf(input_ids=torch.tensor([ids])).logits[0]
        ours = model.module.mlm_head(predictions.hidden_states(model, ids, None)[0])
    assert (ours - reference).abs().max() <= 1e-4
    top = predictions.mask_fill_top_k(model, "The keys to the <mask> are on the table.", k=3)
    expected = torch.log_softmax(reference[position].double(), -1).topk(3)
    assert [p.id for p in top] == expected.indices.tolist()
    assert [p.logprob for p in top] == pytest.approx(expected.values.tolist(), abs=1e-4)


def test_mlm_head_old_names_untied_decoder_and_missing_head():
    """Old gamma/beta names in the head, an untied decoder (its own weight, not the embedding), and a
    config naming BertForMaskedLM over a checkpoint without the head (loads, without mask filling)."""
    tokenizer = encoder_tokenizer()
    hf = tiny_mlm("bert", tokenizer)
    hf.config.tie_word_embeddings = False
    state = dict(hf.state_dict())
    state["cls.predictions.decoder.weight"] = torch.randn_like(state["cls.predictions.decoder.weight"])
    with torch.no_grad():
        hf.cls.predictions.decoder.weight = torch.nn.Parameter(state["cls.predictions.decoder.weight"].clone())
    for p in ("weight", "bias"):
        old = {"weight": "gamma", "bias": "beta"}[p]
        state[f"cls.predictions.transform.LayerNorm.{old}"] = state.pop(f"cls.predictions.transform.LayerNorm.{p}")
    module = build_module(hf.config.to_dict(), state).eval()
    assert module.mlm_head.decoder.weight is not module.token_embedding.weight
    ids = torch.tensor([tokenizer.encode("The cat sat on the [MASK].").ids])
    with torch.no_grad():
        ours = module.mlm_head(module(ids).hidden)
        reference = hf(input_ids=ids).logits
    assert (ours - reference).abs().max() <= 1e-4
    headless = {k: v for k, v in hf.state_dict().items() if not k.startswith("cls.")}
    module = build_module(hf.config.to_dict(), headless)
    assert module.mlm_head is None and "mlm_head.dense.weight" not in module.state_dict()


def test_mlm_head_loads_from_a_saved_checkpoint_through_attnviz_load(tmp_path):
    """The real path: save_pretrained writes safetensors without the tied decoder weight, and the
    converter must still build the head (and a changed bias must show in the logits)."""
    import attnviz

    tokenizer = encoder_tokenizer()
    hf = tiny_mlm("bert", tokenizer)
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]",
                               pad_token="[PAD]", mask_token="[MASK]").save_pretrained(tmp_path)
    model = attnviz.load(str(tmp_path), device="cpu")
    assert model.info.mlm_head
    ids, _ = predictions.mask_ids(model, "The cat sat on the [MASK].")
    with torch.no_grad():
        reference = hf(input_ids=torch.tensor([ids])).logits[0]
        ours = model.module.mlm_head(predictions.hidden_states(model, ids, None)[0])
    assert (ours - reference).abs().max() <= 1e-4


def test_ablation_effect_encoders(mlm):
    model, _ = mlm
    mask = predictions.head_mask_of(model, [(1, 1)])
    effect = ablation.ablation_effect(model, "The cat sat on the [MASK].", mask, k=3)
    assert effect.quantity == "mask_fill" and effect.continuation_before is None
    assert effect.before == predictions.mask_fill_top_k(model, "The cat sat on the [MASK].", k=3)
    assert effect.after == predictions.mask_fill_top_k(model, "The cat sat on the [MASK].", mask, k=3)


def test_encoder_without_a_head_has_no_mask_filling_and_is_measured_by_embedding():
    tokenizer = encoder_tokenizer()
    hf = tiny_mlm("bert", tokenizer)
    config = hf.config.to_dict() | {"architectures": ["BertModel"]}
    state = {k.removeprefix("bert."): v for k, v in hf.state_dict().items() if not k.startswith("cls.")}
    module = build_module(config, state).eval()
    model = LoadedModel(module, tokenizer, ModelInfo.describe(module, "tiny bert", "(test)", "bert", 60),
                        {"pad_token": "[PAD]"})
    assert module.mlm_head is None and not model.info.mlm_head
    assert ablation.default_quantity(model) == "embedding"
    with pytest.raises(ValueError, match="masked-LM head"):
        predictions.mask_fill_top_k(model, "The [MASK] sat.")


def test_mask_must_appear_once(mlm):
    model, _ = mlm
    with pytest.raises(ValueError, match="exactly one"):
        predictions.mask_fill_top_k(model, "The cat sat.")
    with pytest.raises(ValueError, match="exactly one"):
        predictions.mask_fill_top_k(model, "The [MASK] sat on the [MASK].")


def test_embedding_cosine_change_by_hand(mlm):
    model, _ = mlm
    text = "The keys to the cabinet are on the table."
    mask = np.ones((2, 4))
    assert predictions.embedding_cosine_change(model, text, mask) == pytest.approx(0.0, abs=1e-12)  # same vectors
    mask[1, 2] = 0
    # By hand: the mean of the final hidden states over every token of the text (specials included,
    # as sentence-transformers' mean pooling over the attention mask), then 1 - cosine.
    plain = model.run(text).hidden.astype(np.float64).mean(0)
    ids = model.tokenizer.encode(text).ids
    ablated = predictions.hidden_states(model, ids, predictions.as_head_mask(model, mask))[0]
    ablated = ablated.double().numpy().mean(0)
    expected = 1 - plain @ ablated / (np.linalg.norm(plain) * np.linalg.norm(ablated))
    change = predictions.embedding_cosine_change(model, text, mask)
    assert change == pytest.approx(expected, abs=1e-7)
    assert change > 1e-6


# --- one ablation, before and after ------------------------------------------------------------------


def test_ablation_effect_decoder(decoder):
    model, _ = decoder
    off = [(0, 1), (1, 2)]
    mask = predictions.head_mask_of(model, off)
    assert mask.sum() == mask.size - 2 and mask[0, 1] == mask[1, 2] == 0
    effect = ablation.ablation_effect(model, "The keys to the", mask, continuation=" cabinet")
    assert effect.quantity == "next_token"
    assert effect.before == predictions.next_token_top_k(model, "The keys to the")
    assert effect.after == predictions.next_token_top_k(model, "The keys to the", mask)
    everything = {p.id: p.logprob for p in predictions.next_token_top_k(model, "The keys to the", mask, k=10_000)}
    assert effect.before_after == pytest.approx([everything[p.id] for p in effect.before], abs=1e-6)
    assert effect.continuation_before == predictions.continuation_logprob(model, "The keys to the", " cabinet")
    assert effect.continuation_after == predictions.continuation_logprob(model, "The keys to the", " cabinet", mask)
    assert effect.continuation_before != effect.continuation_after
    with pytest.raises(ValueError, match="no head 2.0"):
        predictions.head_mask_of(model, [(2, 0)])


# --- the importance scan ------------------------------------------------------------------------------


def single_change(model, text, quantity, continuation, layer, head):
    """The change of one ablation computed through the public single-run functions."""
    mask = np.ones((model.config.n_layers, model.config.n_heads))
    mask[layer, head] = 0
    if quantity == "continuation":
        return predictions.continuation_logprob(model, text, continuation)[0] - predictions.continuation_logprob(
            model, text, continuation, mask)[0]
    if quantity == "next_token":
        top = predictions.next_token_top_k(model, text, k=1)[0]
        after = {p.id: p.logprob for p in predictions.next_token_top_k(model, text, mask, k=model.config.vocab_size)}
        return top.logprob - after[top.id]
    if quantity == "mask_fill":
        top = predictions.mask_fill_top_k(model, text, k=1)[0]
        after = {p.id: p.logprob for p in predictions.mask_fill_top_k(model, text, mask, k=model.config.vocab_size)}
        return top.logprob - after[top.id]
    return predictions.embedding_cosine_change(model, text, mask)


def check_scan(model, text, quantity, continuation=None):
    calls = []
    scan = ablation.importance_scan(model, text, quantity, continuation, batch_size=3,
                                   progress=lambda done, total: calls.append((done, total)))
    n = model.config.n_layers * model.config.n_heads
    assert scan.shape == (model.config.n_layers, model.config.n_heads)
    # Batches of 3 rows cross layers (rows 3..5 are heads 0.3, 1.0, 1.1) and the last one is ragged.
    assert calls == [(min(d, n), n) for d in range(3, n + 3, 3)]
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            expected = single_change(model, text, quantity, continuation, layer, head)
            assert scan[layer, head] == pytest.approx(expected, abs=2e-5), (layer, head)
    assert np.abs(scan).max() > 1e-4  # the heads matter: the equality above is not 0 == 0


@pytest.mark.parametrize("quantity", ["continuation", "next_token"])
def test_scan_rows_equal_single_ablations_decoder(decoder, quantity):
    model, _ = decoder
    continuation = " are on the table." if quantity == "continuation" else None
    check_scan(model, "The keys to the cabinet", quantity, continuation)
    # The default batch (every head of the tiny model at once, from layer 0) gives the same grid.
    assert ablation.importance_scan(model, "The keys to the cabinet", quantity, continuation) == pytest.approx(
        ablation.importance_scan(model, "The keys to the cabinet", quantity, continuation, batch_size=1), abs=2e-5)


def test_scan_rows_equal_single_ablations_encoder(mlm):
    model, _ = mlm
    check_scan(model, "The keys to the [MASK] are on the table.", "mask_fill")
    check_scan(model, "The keys to the cabinet are on the table.", "embedding")


def test_scan_stops_when_asked(decoder):
    model, _ = decoder
    asked = []

    def should_stop():
        asked.append(1)
        return len(asked) > 1

    with pytest.raises(ablation.ScanStopped):
        ablation.importance_scan(model, "The cat", "next_token", batch_size=2, should_stop=should_stop)
    assert len(asked) == 2


def test_scan_batch_is_bounded_by_memory(decoder):
    model, _ = decoder
    assert batch_bytes.scan_batch_size(model, 20) == batch_bytes.MAX_SCAN_BATCH  # tiny model: the cap
    one_row = batch_bytes.scan_bytes(model, 20, 2) - batch_bytes.scan_bytes(model, 20, 1)
    assert batch_bytes.scan_batch_size(model, 20, budget=3 * one_row) == 3
    assert batch_bytes.scan_batch_size(model, 20, budget=1) == 1
