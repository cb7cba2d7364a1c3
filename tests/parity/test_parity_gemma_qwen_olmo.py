"""Parity with HF eager (float32) for Gemma 1/2/3, Qwen3, OLMo 2 and SmolLM3 on tiny random models.

Each tiny config makes its family's special feature bite (more layers than the sliding/full period, a
sequence longer than the window, soft-caps small enough to matter, NoPE layers), and for each feature a
copy of our model with the feature switched off (same weights) must then miss HF by a clear margin, so
the parity check can fail. Bounds as tests/parity/test_parity_tiny.py: attentions 1e-5, hidden and logits 1e-4.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers as tf

from attnviz.loading import build_module
from attnviz.loading.registry import converter_for
from attnviz.transformer.masks import causal_mask
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import Recorder
from tests.helpers.decoding import step_by_step
from tests.helpers.tiny_hf import ATTENTION_TOL, HIDDEN_TOL, VOCAB, assert_parity, batch, hf_model

WINDOW = 4  # shorter than batch()'s 12 tokens, so sliding layers see less than full ones
FAIL = 1e-3  # a switched-off feature must miss HF by at least this much (100x the attention bound)


def gemma3(**extra):
    params = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=7, num_attention_heads=4,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=128, sliding_window=WINDOW,
        query_pre_attn_scalar=16, pad_token_id=0,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0}})
    return lambda: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**(params | extra)))


GEMMA3 = {
    # 7 layers: 5 sliding, 1 full, 1 sliding again (past the period of 6); MQA as Gemma 3 270M
    "gemma3": gemma3(),
    "gemma3-softcaps": gemma3(attn_logit_softcapping=1.0, final_logit_softcapping=0.1, num_key_value_heads=2),
    "gemma3-linear-rope": gemma3(rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        "full_attention": {"rope_type": "linear", "rope_theta": 1_000_000.0, "factor": 8.0}}),
}


def run(hf, ours, ids, mask):
    """(ours, HF logits output, HF base hidden states) on one batch."""
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
        out = ours(ids, mask)
    return out, ref, base.last_hidden_state


def errors(out, ref, hidden, mask) -> dict[str, float]:
    keep = mask.bool()
    attn = (out.attentions - torch.stack(ref.attentions)).abs().transpose(2, 3)[:, keep]
    return {"attentions": attn.max().item(), "hidden": (out.hidden - hidden).abs()[keep].max().item(),
            "logits": (out.logits - ref.logits).abs()[keep].max().item()}


def check_parity(hf, ours, ids, mask):
    out, ref, hidden = run(hf, ours, ids, mask)
    assert_parity(out, ref.attentions, hidden, mask)
    logits = (out.logits - ref.logits).abs()[mask.bool()]
    assert logits.max() <= HIDDEN_TOL, logits.max()
    return out


def variant(hf, rename: dict[str, str] | None = None, **changes) -> Transformer:
    """Our model of `hf` with config fields changed (a feature switched off), the same weights (`rename`:
    our tensor names moved to other slots, for a norm put in another place)."""
    config = hf.config.to_dict()
    converter = converter_for(config)
    base = converter.config(config)
    state = converter.weights(config, dict(hf.state_dict()), Transformer(base))
    for old, new in (rename or {}).items():
        state = {k.replace(old, new): v for k, v in state.items()}
    module = Transformer(dataclasses.replace(base, **changes))
    own = module.state_dict()
    missing, _ = module.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)
    assert not missing, missing
    return module.eval()


def assert_misses(hf, changes: dict, quantity: str = "attentions", rename=None):
    ids, mask, _ = batch(pad_id=0)
    miss = errors(*run(hf, variant(hf, rename, **changes), ids, mask), mask)
    assert miss[quantity] > FAIL, (changes, miss)


def assert_decoding_matches(ours, n: int = 13):
    """Incremental decoding with our KV cache (prompt of 5, a chunk of 3, then one token a call) equals
    one full pass: logits within 1e-4, attention rows within 1e-5."""
    ids = torch.randint(3, VOCAB, (1, n), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = ours(ids)
        logits, attentions = step_by_step(ours, ids, (5, 3))
    assert (logits - full.logits[0]).abs().max() <= HIDDEN_TOL
    assert (attentions - full.attentions[:, 0]).abs().max() <= ATTENTION_TOL
    for layer in range(ours.config.n_layers):  # each layer's rows stay inside its own window
        blocked = ~causal_mask(n, window=ours.config.window(layer))
        assert torch.all(attentions[layer][:, blocked] == 0)


def assert_loads_from_folder(make, folder):
    """save_pretrained (safetensors) of a tiny model with a byte-level BPE tokenizer, read back through
    attnviz.load: our module on the folder equals HF eager on the same ids."""
    import attnviz
    from tests.helpers.tiny_tokenizers import bpe_tokenizer

    tokenizer = bpe_tokenizer(bos=True)
    hf = hf_model(make(tokenizer.get_vocab_size()))
    hf.save_pretrained(folder)
    assert any(folder.glob("*.safetensors"))
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", pad_token="<pad>").save_pretrained(folder)
    loaded = attnviz.load(str(folder), device="cpu")
    ids = torch.tensor([tokenizer.encode("The cat sat on the mat, and the dog watched the cat.").ids])
    assert ids.shape[1] > WINDOW
    with torch.no_grad():
        ref = hf(input_ids=ids, output_attentions=True)
        out = loaded.module(ids)
    assert (out.attentions - torch.stack(ref.attentions)).abs().max() <= ATTENTION_TOL
    assert (out.logits - ref.logits).abs().max() <= HIDDEN_TOL
    assert_query_key_view_reproduces_rows(loaded)
    return loaded


def assert_query_key_view_reproduces_rows(loaded, text: str = "The keys to the cabinet are on the table."):
    """The query-key view (analysis.query_key, fed the recorded queries and keys and the model's
    score_setup) gives back every row of every layer: windows, scales, caps and NoPE included."""
    import numpy as np

    from attnviz.analysis.query_key import query_key

    trace = loaded.run(text)
    assert len(trace.tokens) > WINDOW
    worst = 0.0
    for layer in range(loaded.config.n_layers):
        recorded = loaded.record(text, names=("queries", "keys"), layer=layer)
        for head in range(loaded.config.n_heads):
            setup = loaded.score_setup(layer, head)
            for position in range(len(trace.tokens)):
                view = query_key(recorded["queries"], recorded["keys"], trace.kv_group, head, position, **setup)
                row = trace.attentions[layer, head, position].astype(np.float64)
                worst = max(worst, float(np.abs(view.probabilities - row).max()))
    assert worst <= ATTENTION_TOL


# ------------------------------------------------------------------------------------------------ Gemma 3


@pytest.mark.parametrize("case", GEMMA3)
def test_gemma3_matches_hf_padded(case):
    hf = hf_model(GEMMA3[case])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id=0)
    out = check_parity(hf, ours, ids, mask)
    kinds = hf.config.layer_types
    assert [ours.config.window(i) for i in range(7)] == [WINDOW if k == "sliding_attention" else None for k in kinds]
    assert kinds[5] == "full_attention" and kinds.count("full_attention") == 1
    # the sliding layers really cut: query 8 sees keys 5..8 only, the full layer 5 sees 0..8
    assert torch.all(out.attentions[0, 0, :, 8, :5] == 0) and torch.all(out.attentions[5, 0, :, 8, :9] > 0)


@pytest.mark.parametrize("changes", [
    {"qk_norm": None},
    {"layer_windows": None},  # every layer full
    {"local_rope_theta": None},  # sliding layers on the global base
    {"attn_scale": None},  # 1/sqrt(head_dim) instead of query_pre_attn_scalar^-1/2
    {"norm": "rmsnorm"},  # w instead of (1 + w)
], ids=lambda c: next(iter(c)))
def test_gemma3_features_change_the_result(changes):
    assert_misses(hf_model(GEMMA3["gemma3"]), changes)


@pytest.mark.parametrize("changes, quantity", [
    ({"embed_scale": None}, "hidden"),
    ({"final_softcap": None}, "logits"),
], ids=lambda c: next(iter(c)) if isinstance(c, dict) else c)
def test_gemma3_scales_and_caps_change_the_result(changes, quantity):
    assert_misses(hf_model(GEMMA3["gemma3-softcaps"]), changes, quantity)


def test_gemma3_leaves_attention_uncapped_as_hf_does():
    """HF's Gemma3Attention never passes attn_logit_softcapping to its kernel; parity above (with it set
    to 1.0, small enough to bite) holds because ours leaves it out too, and capping would miss HF."""
    hf = hf_model(GEMMA3["gemma3-softcaps"])
    assert hf.config.attn_logit_softcapping == 1.0
    assert build_module(hf.config.to_dict(), hf.state_dict()).config.attn_softcap is None
    assert_misses(hf, {"attn_softcap": 1.0})


def test_gemma3_linear_rope_on_full_layers_only_changes_the_result():
    hf = hf_model(GEMMA3["gemma3-linear-rope"])
    assert_misses(hf, {"rope_scaling": None})
    ours = build_module(hf.config.to_dict(), hf.state_dict())
    assert ours.config.rope_at(0) == (10_000.0, None) and ours.config.rope_at(5)[1]["rope_type"] == "linear"


@pytest.mark.parametrize("case", GEMMA3)
def test_gemma3_decoding_with_the_cache_equals_a_full_pass(case):
    hf = hf_model(GEMMA3[case])
    assert_decoding_matches(build_module(hf.config.to_dict(), hf.state_dict()).eval())


def test_gemma3_query_key_view_reproduces_the_scores_of_a_sliding_layer(monkeypatch):
    """The recorder keeps queries and keys after q/k norm and rotary, the ones HF's eager attention
    multiplies; queries . keys * scale, plus the sliding layer's mask, gives back the recorded scores
    (what the query-key view shows)."""
    from transformers.models.gemma3 import modeling_gemma3

    hf = hf_model(GEMMA3["gemma3"])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = batch(pad_id=0)[0][:1]
    seen = []
    eager = modeling_gemma3.eager_attention_forward

    def spy(module, query, key, *args, **kwargs):
        seen.append((query, key))
        return eager(module, query, key, *args, **kwargs)

    monkeypatch.setattr(modeling_gemma3, "eager_attention_forward", spy)
    with torch.no_grad():
        hf(input_ids=ids)
        out = ours(ids, record=Recorder("queries", "keys", "scores"))
    layer = 1
    assert ours.config.window(layer) == WINDOW
    q, k = out.record.layers[layer]["queries"], out.record.layers[layer]["keys"]  # [1, 4, T, 8], [1, 1, T, 8]
    assert len(seen) == 7
    assert (q - seen[layer][0]).abs().max() <= 1e-5 and (k - seen[layer][1]).abs().max() <= 1e-5
    scores = out.record.layers[layer]["scores"]
    rebuilt = torch.matmul(q, k.transpose(-2, -1)) * ours.config.attn_scale  # one KV head for all 4 (MQA)
    keep = causal_mask(12, window=WINDOW)
    assert (rebuilt - scores).abs()[..., keep].max() <= 1e-5
    assert torch.all(scores[..., ~keep] == torch.finfo(scores.dtype).min)
    # not vacuous: without the q/k norm the queries differ (the norm's weights are (1 + w), w ~ 0.02)
    assert (ours.blocks[layer].attn.q_norm.weight.abs() > 0).all()


# The config dict that transformers' GGUF loader (load_gguf_checkpoint, return_tensors=False) gives for
# the offline Gemma 3 270M Q4_K_M GGUF: rope_theta at top level, and no layer_types, local base or
# query_pre_attn_scalar (Gemma3TextConfig fills them in when AutoConfig reads the file).
GEMMA3_270M_GGUF = {
    "tie_word_embeddings": True, "model_type": "gemma3_text", "max_position_embeddings": 32768, "hidden_size": 640,
    "num_hidden_layers": 18, "intermediate_size": 2048, "num_attention_heads": 4,
    "rms_norm_eps": 9.999999974752427e-07, "head_dim": 256, "rope_theta": 1000000.0, "sliding_window": 512,
    "num_key_value_heads": 1, "bos_token_id": 2, "eos_token_id": 1, "unk_token_id": 3, "pad_token_id": 0,
    "vocab_size": 262144,
}


def test_gemma3_270m_gguf_config_converts_raw_and_finished_alike():
    raw = gemma3_config_of(GEMMA3_270M_GGUF)
    finished = tf.Gemma3TextConfig(**{k: v for k, v in GEMMA3_270M_GGUF.items() if k != "model_type"}).to_dict()
    assert raw == gemma3_config_of(finished)
    assert raw.n_layers == 18 and raw.kv_heads == 1 and raw.n_heads == 4 and raw.dim_per_head == 256
    assert [raw.window(i) is None for i in range(18)] == [i in (5, 11, 17) for i in range(18)]
    assert raw.rope_at(0) == (10_000.0, None) and raw.rope_at(5) == (1_000_000.0, None)
    assert raw.attn_scale == 256**-0.5 and raw.qk_norm == "head" and raw.norm == "gemma_rmsnorm"
    assert raw.embed_scale == 640**0.5 and raw.activation == "gelu_tanh" and raw.tie_word_embeddings


def test_gemma3_loads_from_a_local_folder(tmp_path):
    loaded = assert_loads_from_folder(lambda vocab: gemma3(vocab_size=vocab), tmp_path)
    assert loaded.info.model_type == "gemma3_text"


def gemma3_config_of(hf: dict):
    return converter_for(hf).config(hf)


def test_gemma3_multimodal_wrapper_reads_its_text_part():
    """Gemma 3 4B and larger are Gemma3ForConditionalGeneration: our model is its language model."""
    torch.manual_seed(0)
    text = tf.Gemma3TextConfig(
        vocab_size=VOCAB + 200, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=16, pad_token_id=0)
    vision = tf.SiglipVisionConfig(hidden_size=16, intermediate_size=20, num_hidden_layers=1, num_attention_heads=2,
                                   image_size=28, patch_size=14)
    config = tf.Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                             image_token_index=VOCAB + 100, boi_token_index=VOCAB + 101, eoi_token_index=VOCAB + 102)
    hf = hf_model(lambda: tf.Gemma3ForConditionalGeneration(config))
    state = hf.state_dict()
    assert any(k.startswith("model.vision_tower.") for k in state)
    ours = build_module(hf.config.to_dict(), state).eval()
    assert ours.config.family == "gemma3_text" and ours.config.n_layers == 2
    # the hub's layout (language_model.model.*, vision_tower.*) converts too
    hub = {k.replace("model.language_model.", "language_model.model.").replace("model.vision_tower.", "vision_tower.")
           .replace("model.multi_modal_projector.", "multi_modal_projector."): v for k, v in state.items()}
    hub_module = build_module(hf.config.to_dict(), hub).eval()
    ids, mask, _ = batch(pad_id=0)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.model.language_model(input_ids=ids, attention_mask=mask)
        for module in (ours, hub_module):
            out = module(ids, mask)
            assert_parity(out, ref.attentions, base.last_hidden_state, mask)
            assert (out.logits - ref.logits).abs()[mask.bool()].max() <= HIDDEN_TOL


# --------------------------------------------------------------------------------------------- Gemma 1, 2


def gemma1(**extra):
    # MQA (one KV head) and head_dim 16 set explicitly, unlike d_model / n_heads = 8 (Gemma's 256 style)
    params = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=1, head_dim=16, max_position_embeddings=128, pad_token_id=0)
    return lambda: tf.GemmaForCausalLM(tf.GemmaConfig(**(params | extra)))


def gemma2(**extra):
    # 5 layers: sliding, full, sliding, full, sliding (HF's order: layer 0 slides); caps small enough to bite
    params = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=5, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=128, sliding_window=WINDOW,
                  query_pre_attn_scalar=16, attn_logit_softcapping=1.0, final_logit_softcapping=0.1, pad_token_id=0)
    return lambda: sharpened(tf.Gemma2ForCausalLM(tf.Gemma2Config(**(params | extra))))


def sharpened(model, factor: float = 8.0):
    """Queries and keys times `factor`: scores of order 1, as a trained model's, instead of the ~0.01 of a
    random init without q/k norms, so a soft-cap of 1 bites."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(factor)
    return model


GEMMA_1_2 = {
    "gemma": gemma1(),
    "gemma-legacy-gelu": gemma1(hidden_act="gelu"),  # Gemma 1's released configs: means the tanh form
    "gemma2": gemma2(),
    "gemma2-uncapped": gemma2(attn_logit_softcapping=None, final_logit_softcapping=None),
}


@pytest.mark.parametrize("case", GEMMA_1_2)
def test_gemma_1_and_2_match_hf_padded(case):
    hf = hf_model(GEMMA_1_2[case])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id=0)
    check_parity(hf, ours, ids, mask)
    assert ours.config.activation == "gelu_tanh" and ours.config.norm == "gemma_rmsnorm"


def test_gemma1_is_mqa_with_its_own_head_dim():
    hf = hf_model(GEMMA_1_2["gemma"])
    ours = build_module(hf.config.to_dict(), hf.state_dict())
    assert ours.config.attention_kind == "MQA" and ours.kv_group == [0, 0, 0, 0]
    assert ours.blocks[0].attn.q_proj.weight.shape == (4 * 16, 32)
    assert ours.blocks[0].attn.k_proj.weight.shape == (16, 32)


@pytest.mark.parametrize("changes, quantity", [
    ({"norm": "rmsnorm"}, "attentions"),
    ({"embed_scale": None}, "hidden"),
], ids=lambda c: next(iter(c)) if isinstance(c, dict) else c)
def test_gemma1_features_change_the_result(changes, quantity):
    assert_misses(hf_model(GEMMA_1_2["gemma"]), changes, quantity)


def test_gemma2_alternation_is_sliding_first_as_hf():
    """TransformerLens once had Gemma 2's local/global order reversed (TransformerLens #778). HF's
    layer_types: layer 0 slides, layer 1 attends fully; with 12 tokens > window 4 the order shows."""
    hf = hf_model(GEMMA_1_2["gemma2"])
    assert hf.config.layer_types[:2] == ["sliding_attention", "full_attention"]
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    assert [ours.config.window(i) for i in range(5)] == [WINDOW, None, WINDOW, None, WINDOW]
    assert [ours.config.layer_kind(i) for i in range(2)] == ["sliding 4, soft-capped", "full, soft-capped"]
    ids, mask, _ = batch(pad_id=0)
    out = check_parity(hf, ours, ids, mask)
    assert torch.all(out.attentions[0, 0, :, 8, :5] == 0) and torch.all(out.attentions[1, 0, :, 8, :9] > 0)
    reversed_order = tuple(None if w else WINDOW for w in ours.config.layer_windows)  # full first: #778's bug
    assert_misses(hf, {"layer_windows": reversed_order})


@pytest.mark.parametrize("changes, quantity", [
    ({"attn_softcap": None}, "attentions"),
    ({"final_softcap": None}, "logits"),
    ({"attn_scale": None}, "attentions"),
    ({"layer_windows": None}, "attentions"),
    ({"norm_placement": "pre"}, "attentions"),  # without the extra post-norms
    ({"embed_scale": None}, "hidden"),
], ids=lambda c: next(iter(c)) if isinstance(c, dict) else c)
def test_gemma2_features_change_the_result(changes, quantity):
    assert_misses(hf_model(GEMMA_1_2["gemma2"]), changes, quantity)


@pytest.mark.parametrize("case", ["gemma", "gemma2"])
def test_gemma_1_and_2_decoding_with_the_cache_equals_a_full_pass(case):
    hf = hf_model(GEMMA_1_2[case])
    assert_decoding_matches(build_module(hf.config.to_dict(), hf.state_dict()).eval())


@pytest.mark.parametrize("case", ["gemma", "gemma2"])
def test_gemma_1_and_2_load_from_a_local_folder(case, tmp_path):
    make = gemma1 if case == "gemma" else gemma2
    assert_loads_from_folder(lambda vocab: make(vocab_size=vocab), tmp_path)


# ----------------------------------------------------------------------------------- Qwen3, OLMo 2, SmolLM3


def llama_shaped(cls, config_cls, **extra):
    params = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0)
    return lambda: cls(config_cls(**(params | extra)))


OTHERS = {
    "qwen3": llama_shaped(tf.Qwen3ForCausalLM, tf.Qwen3Config, head_dim=16),
    # use_sliding_window: layers from max_window_layers = 2 on slide
    "qwen3-sliding": llama_shaped(tf.Qwen3ForCausalLM, tf.Qwen3Config, head_dim=8, use_sliding_window=True,
                                  sliding_window=WINDOW, max_window_layers=2),
    "olmo2": llama_shaped(tf.Olmo2ForCausalLM, tf.Olmo2Config),
    "olmo2-mha": llama_shaped(tf.Olmo2ForCausalLM, tf.Olmo2Config, num_key_value_heads=4),
    # 5 layers, NoPE every 4th (layer 3), from no_rope_layer_interval
    "smollm3": llama_shaped(tf.SmolLM3ForCausalLM, tf.SmolLM3Config, num_hidden_layers=5),
    # an explicit list (1 = rotary, 0 = NoPE) and sliding NoPE layers
    "smollm3-list-sliding": llama_shaped(tf.SmolLM3ForCausalLM, tf.SmolLM3Config, num_hidden_layers=5,
                                         no_rope_layers=[1, 0, 1, 1, 0], use_sliding_window=True,
                                         sliding_window=WINDOW),
}


@pytest.mark.parametrize("case", OTHERS)
def test_qwen3_olmo2_smollm3_match_hf_padded(case):
    hf = hf_model(OTHERS[case])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id=0)
    check_parity(hf, ours, ids, mask)
    layer_types = getattr(hf.config, "layer_types", None) or ["full_attention"] * 4
    assert [ours.config.window(i) for i in range(len(layer_types))] == [
        WINDOW if kind == "sliding_attention" else None for kind in layer_types]


def test_qwen3_sliding_layers_are_the_last_ones():
    hf = hf_model(OTHERS["qwen3-sliding"])
    ours = build_module(hf.config.to_dict(), hf.state_dict())
    assert hf.config.layer_types == ["full_attention"] * 2 + ["sliding_attention"] * 2
    assert ours.config.layer_windows == (None, None, WINDOW, WINDOW)
    raw = {k: v for k, v in hf.config.to_dict().items() if k != "layer_types"}  # a config.json without the list
    assert converter_for(raw).config(raw) == ours.config


@pytest.mark.parametrize("case, changes", [
    ("qwen3", {"qk_norm": None}),
    ("qwen3-sliding", {"layer_windows": None}),
    ("olmo2", {"qk_norm": None}),
    ("smollm3", {"nope_layers": ()}),  # rotary on every layer
    ("smollm3-list-sliding", {"nope_layers": (0, 2, 3)}),  # HF's 1/0 read the other way round
    ("smollm3-list-sliding", {"layer_windows": None}),
], ids=lambda c: c if isinstance(c, str) else next(iter(c)))
def test_qwen3_olmo2_smollm3_features_change_the_result(case, changes):
    assert_misses(hf_model(OTHERS[case]), changes)


def test_olmo2_norms_after_each_sublayer_matter():
    """OLMo 2 normalises each sublayer's output, not its input: the same norms put before the sublayers
    (Llama's place) miss HF."""
    hf = hf_model(OTHERS["olmo2"])
    ours = build_module(hf.config.to_dict(), hf.state_dict())
    assert ours.blocks[0].attn_norm is None and ours.blocks[0].mlp_norm is None
    assert ours.blocks[0].attn.q_norm.weight.shape == (4 * 8,) and ours.blocks[0].attn.k_norm.weight.shape == (2 * 8,)
    assert_misses(hf, {"norm_placement": "pre"}, rename={"attn_post_norm": "attn_norm", "mlp_post_norm": "mlp_norm"})


def test_smollm3_nope_layers_follow_hf_flags():
    hf = hf_model(OTHERS["smollm3"])
    ours = build_module(hf.config.to_dict(), hf.state_dict())
    assert hf.config.no_rope_layers == [1, 1, 1, 0, 1]  # HF: 1 = uses rotary
    assert ours.config.nope_layers == (3,) and ours.config.layer_kind(3) == "full, NoPE"
    assert ours.config.rope_at(3) is None and ours.config.rope_at(2) is not None
    listed = build_module(hf_model(OTHERS["smollm3-list-sliding"]).config.to_dict(),
                          hf_model(OTHERS["smollm3-list-sliding"]).state_dict()).config
    assert listed.nope_layers == (1, 4) and listed.layer_windows == (None, WINDOW, None, None, WINDOW)


@pytest.mark.parametrize("case", OTHERS)
def test_qwen3_olmo2_smollm3_decoding_with_the_cache_equals_a_full_pass(case):
    hf = hf_model(OTHERS[case])
    assert_decoding_matches(build_module(hf.config.to_dict(), hf.state_dict()).eval())


@pytest.mark.parametrize("case", ["qwen3-sliding", "olmo2", "smollm3-list-sliding"])
def test_qwen3_olmo2_smollm3_load_from_a_local_folder(case, tmp_path):
    factories = {
        "qwen3-sliding": lambda vocab: llama_shaped(
            tf.Qwen3ForCausalLM, tf.Qwen3Config, vocab_size=vocab, head_dim=8, use_sliding_window=True,
            sliding_window=WINDOW, max_window_layers=2),
        "olmo2": lambda vocab: llama_shaped(tf.Olmo2ForCausalLM, tf.Olmo2Config, vocab_size=vocab),
        "smollm3-list-sliding": lambda vocab: llama_shaped(
            tf.SmolLM3ForCausalLM, tf.SmolLM3Config, vocab_size=vocab, num_hidden_layers=5,
            no_rope_layers=[1, 0, 1, 1, 0], use_sliding_window=True, sliding_window=WINDOW),
    }
    loaded = assert_loads_from_folder(factories[case], tmp_path)
    assert loaded.info.model_type == case.split("-")[0]


@pytest.mark.parametrize("case", ["gemma3", "gemma", "gemma2", "qwen3-sliding", "olmo2", "smollm3-list-sliding"])
def test_recorder_and_head_ablation_work_for_each_family(case):
    """Every recorded name comes back with its shape, and switching a head off zeroes its output and
    changes the next layers' attention, on each family's own blocks (MQA, GQA, NoPE, sandwich, after)."""
    from attnviz.transformer.record import NAMES

    hf = hf_model({**GEMMA3, **GEMMA_1_2, **OTHERS}[case])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    c = ours.config
    ids = batch(pad_id=0)[0][:1]
    head_mask = torch.ones(c.n_layers, c.n_heads)
    head_mask[0, 1] = 0
    with torch.no_grad():
        out = ours(ids, record=Recorder(*NAMES))
        ablated = ours(ids, head_mask=head_mask, record=Recorder("attentions", "head_outputs"))
    layer = out.record.layers[0]
    t, d = ids.shape[1], c.dim_per_head
    assert layer["queries"].shape == (1, c.n_heads, t, d) and layer["keys"].shape == (1, c.kv_heads, t, d)
    assert layer["scores"].shape == out.attentions[0].shape == (1, c.n_heads, t, t)
    assert layer["value_norms"].shape == (1, c.n_heads, t) and layer["head_outputs"].shape == (1, c.n_heads, t, d)
    assert torch.all(ablated.record.layers[0]["head_outputs"][:, 1] == 0)
    assert (ablated.attentions[1:] - out.attentions[1:]).abs().max() > ATTENTION_TOL


@pytest.mark.parametrize("case, changes, message", [
    ("gemma3", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ("gemma3", {"rope_parameters": {"sliding_attention": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0},
                                    "full_attention": {"rope_type": "default", "rope_theta": 1e6}}},
     "sliding-layer rope_type 'linear'"),
    ("gemma3", {"layer_types": ["chunked_attention"] * 7}, "layer_types"),
    ("gemma2", {"attention_bias": True}, "attention_bias"),
    ("gemma3", {"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                    "full_attention": {"rope_type": "dynamic", "rope_theta": 1e6, "factor": 2.0}}},
     "rope_type 'dynamic'"),
    ("qwen3", {"layer_types": ["sliding_attention"] * 4, "sliding_window": None}, "no sliding_window"),
    ("olmo2", {"clip_qkv": 8.0}, "clip_qkv"),
    ("smollm3", {"no_rope_layers": [1, 0]}, "no_rope_layers"),
])
def test_unsupported_options_are_refused_by_name(case, changes, message):
    factory = {**GEMMA3, **GEMMA_1_2, **OTHERS}[case]
    config = factory().config.to_dict() | changes
    converter = converter_for(config)
    with pytest.raises(ValueError, match=message), torch.device("meta"):  # as the size check, before any weight
        converter.module(converter.config(config))
