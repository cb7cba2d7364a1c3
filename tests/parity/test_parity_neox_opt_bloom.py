"""GPT-NeoX (Pythia), GPT-Neo, OPT, BLOOM and Phi 1/1.5/2 against HF eager (float32) on tiny random models.

Bounds as tests/parity/test_parity_tiny.py: attention probabilities <= 1e-5, final hidden states and logits <= 1e-4,
with a right-padded batch, and a left-padded one where positions come from the mask (OPT, BLOOM). Each tiny
config exercises what is special about its family (partial rotary, parallel residual, global/local layers with
a window shorter than the text, unscaled scores, OPT's offset positions and post-norm, ALiBi with 6 heads,
Phi's shared norm and q/k LayerNorm), and for each feature our model rebuilt with it switched off (same
weights) must then FAIL the comparison by a clear margin. Incremental decoding with our KV cache equals the
full pass (and greedy decoding HF's `generate`), and a saved folder loads through `attnviz.load`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import transformers as tf
from transformers.models.bloom.modeling_bloom import _get_alibi_slopes, bloom_gelu_forward

from attnviz.attention_kinds.decoding import greedy_decode
from attnviz.loading import build_module
from attnviz.transformer.alibi import alibi_slopes
from attnviz.transformer.layers import ACTIVATIONS
from attnviz.transformer.masks import causal_mask
from attnviz.transformer.model import Transformer
from tests.helpers.decoding import step_by_step
from tests.helpers.tiny_hf import ATTENTION_TOL, HIDDEN_TOL, VOCAB, assert_parity, batch, hf_model
from tests.helpers.tiny_tokenizers import bpe_tokenizer

CLEAR_MARGIN = 1e-3  # a switched-off feature must miss by far more than the tolerances
WINDOW = 4  # GPT-Neo's local window: shorter than the 12-token batch


def neox(parallel: bool, rotary_pct: float):
    return lambda vocab=VOCAB: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=64, rotary_pct=rotary_pct, rotary_emb_base=100, use_parallel_residual=parallel))


def gpt_neo(vocab=VOCAB):
    # 3 layers over a period of 2: global, local, global
    return tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
        vocab_size=vocab, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=37, max_position_embeddings=64,
        attention_types=[[["global", "local"], 1], [["global"], 1]], window_size=WINDOW))


def opt(**extra):
    return lambda vocab=VOCAB: tf.OPTForCausalLM(tf.OPTConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=37,
        max_position_embeddings=64, **extra))


def bloom(vocab=VOCAB):
    return tf.BloomForCausalLM(tf.BloomConfig(vocab_size=vocab, hidden_size=48, n_layer=2, n_head=6))  # 6: not 2^k


def phi(**extra):
    return lambda vocab=VOCAB: tf.PhiForCausalLM(tf.PhiConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64, partial_rotary_factor=0.5, **extra))


FAMILIES = {
    "gpt_neox-parallel": neox(parallel=True, rotary_pct=0.5),
    "gpt_neox-sequential": neox(parallel=False, rotary_pct=0.25),
    "gpt_neo": gpt_neo,
    "opt": opt(),
    "opt-350m-style": opt(do_layer_norm_before=False, word_embed_proj_dim=16),
    "opt-no-final-norm-no-bias": opt(_remove_final_layer_norm=True, enable_bias=False,
                                     layer_norm_elementwise_affine=False),
    "bloom": bloom,
    "phi": phi(tie_word_embeddings=True),  # the head's weight tied, its bias its own
    "phi-qk-layernorm-gqa": phi(qk_layernorm=True, num_key_value_heads=2),
}
LEFT_PADDED = list(FAMILIES)  # where it matters: OPT (positions from the mask), BLOOM (ALiBi key positions)


def pad_id(hf) -> int:
    return hf.config.pad_token_id if hf.config.pad_token_id is not None else 0


def left_padded(pad: int):
    """batch()'s two sequences with the second one's 3 pads moved to its front."""
    ids, mask, _ = batch(pad)
    return ids.clone().index_put_((torch.tensor([1]),), ids[1].roll(3)), mask.clone().index_put_(
        (torch.tensor([1]),), mask[1].roll(3))


def reference(hf, ids, mask):
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
    return out, base.last_hidden_state


def check(ours, hf, ids, mask):
    ref, hidden = reference(hf, ids, mask)
    with torch.no_grad():
        out = ours(ids, mask)
    assert_parity(out, ref.attentions, hidden, mask)
    logits = (out.logits - ref.logits).abs()[mask.bool()]
    assert logits.max() <= HIDDEN_TOL, logits.max()
    return out


def miss(ours, hf, ids, mask) -> float:
    """The largest difference from HF over the real rows: attentions, hidden states and logits."""
    ref, hidden = reference(hf, ids, mask)
    with torch.no_grad():
        out = ours(ids, mask)
    keep = mask.bool()
    attn = (out.attentions - torch.stack(ref.attentions)).abs().transpose(2, 3)[:, keep].max()
    return max(float(attn), float((out.hidden - hidden).abs()[keep].max()),
               float((out.logits - ref.logits).abs()[keep].max()))


def switched(ours: Transformer, state: dict | None = None, **changes) -> Transformer:
    """Our model with config fields changed and the same weights (`state` overrides some)."""
    model = Transformer(dataclasses.replace(ours.config, **changes)).eval()
    weights = {**ours.state_dict(), **(state or {})}
    expected = model.state_dict()
    model.load_state_dict({k: v for k, v in weights.items() if k in expected}, strict=False)
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_parity_right_padded(family):
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id(hf))
    check(ours, hf, ids, mask)


@pytest.mark.parametrize("family", LEFT_PADDED)
def test_parity_left_padded(family):
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask = left_padded(pad_id(hf))
    assert mask[1, :3].sum() == 0 and mask[1, 3:].all()
    check(ours, hf, ids, mask)


def test_what_the_configs_say():
    """The converted configs carry each family's feature (read from HF's own config objects)."""
    def ours(family):
        hf = hf_model(FAMILIES[family])
        return build_module(hf.config.to_dict(), hf.state_dict())

    parallel, sequential = ours("gpt_neox-parallel").config, ours("gpt_neox-sequential").config
    assert (parallel.residual, parallel.rotary_dim) == ("parallel", 4)  # 8 dims per head, rotary_pct 0.5
    assert (sequential.residual, sequential.rotary_dim) == ("sequential", 2)
    neo = ours("gpt_neo").config
    assert neo.layer_windows == (None, WINDOW, None) and neo.attn_scale == 1.0
    assert [neo.layer_kind(i) for i in range(3)] == ["full", f"sliding {WINDOW}", "full"]
    post = ours("opt-350m-style")
    assert post.config.norm_placement == "post" and post.final_norm is None and post.config.embed_proj_dim == 16
    assert ours("opt-no-final-norm-no-bias").final_norm is None and ours("opt").final_norm is not None
    assert ours("bloom").config.layer_kind(0) == "full, ALiBi"
    shared = ours("phi-qk-layernorm-gqa")
    assert shared.config.residual == "parallel_shared" and shared.blocks[0].mlp_norm is None
    assert shared.config.qk_norm == "head" and shared.config.attention_kind == "GQA"
    assert shared.lm_head.bias is not None
    tied = ours("phi")
    assert tied.lm_head.weight is tied.token_embedding.weight and tied.lm_head.bias is not None


def test_gpt_neo_local_layer_sees_only_its_window():
    hf = hf_model(gpt_neo)
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    with torch.no_grad():
        attn = ours(batch(0)[0][:1]).attentions[:, 0]  # L, H, T, T
    assert torch.all(attn[1][..., ~causal_mask(12, window=WINDOW)] == 0)
    assert torch.all(attn[0, :, 8, :5] > 0) and torch.all(attn[2, :, 8, :5] > 0)  # global layers see it all


def _neox_swap(ours):
    return {"parallel": "sequential", "sequential": "parallel"}[ours.config.residual]


def _shift_positions(ours):
    """OPT's table shifted by its offset of 2, so plain 0, 1, 2, ... positions read the same rows: equal
    without padding, wrong once left padding moves the real tokens."""
    table = ours.state_dict()["position_embedding.weight"]
    return {"position_embedding.weight": table.roll(-2, dims=0)}


def _shared_norm_copied(ours):
    return {f"blocks.{i}.mlp_norm.{kind}": ours.state_dict()[f"blocks.{i}.attn_norm.{kind}"]
            for i in range(ours.config.n_layers) for kind in ("weight", "bias")}


# (family, padding: right, left or none, what is switched off, its config changes, its weight changes)
SWITCHED_OFF = [
    ("gpt_neox-parallel", "right", "partial rotary (all dims rotated)", lambda m: {"rotary_dim": None}, None),
    ("gpt_neox-sequential", "right", "partial rotary (all dims rotated)", lambda m: {"rotary_dim": None}, None),
    ("gpt_neox-parallel", "right", "parallel residual", lambda m: {"residual": _neox_swap(m)}, None),
    ("gpt_neox-sequential", "right", "sequential residual", lambda m: {"residual": _neox_swap(m)}, None),
    ("gpt_neo", "right", "local windows", lambda m: {"layer_windows": None}, None),
    ("gpt_neo", "right", "unscaled scores", lambda m: {"attn_scale": None}, None),
    ("opt", "none", "position offset 2", lambda m: {"position_offset": 0}, None),
    ("opt", "left", "positions counted from the mask",
     lambda m: {"positions_from_mask": False, "position_offset": 0}, _shift_positions),
    ("opt-350m-style", "left", "post-norm placement", lambda m: {"norm_placement": "pre", "final_norm": False}, None),
    ("opt", "right", "final norm", lambda m: {"final_norm": False}, None),
    ("bloom", "right", "embedding LayerNorm", lambda m: {"embedding_norm": False}, None),
    ("phi", "right", "partial rotary (all dims rotated)", lambda m: {"rotary_dim": None}, None),
    ("phi", "right", "parallel attention and MLP on one norm (sequential, same norm)",
     lambda m: {"residual": "sequential"}, _shared_norm_copied),
    ("phi-qk-layernorm-gqa", "right", "q/k LayerNorm", lambda m: {"qk_norm": None}, None),
]


@pytest.mark.parametrize("family, padding, feature, changes, weights", SWITCHED_OFF,
                         ids=[f"{f}: {what}" for f, _, what, _, _ in SWITCHED_OFF])
def test_switching_the_feature_off_fails_parity(family, padding, feature, changes, weights):
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask = left_padded(pad_id(hf)) if padding == "left" else batch(pad_id(hf))[:2]
    if padding == "none":  # every token real (a pad at position -1 + 0 would index outside the table)
        mask = torch.ones_like(mask)
    assert miss(ours, hf, ids, mask) <= HIDDEN_TOL
    off = switched(ours, None if weights is None else weights(ours), **changes(ours))
    assert miss(off, hf, ids, mask) > CLEAR_MARGIN, feature
    if weights is _shift_positions:  # the shifted table alone is right without padding: the mask is what matters
        full = torch.ones_like(mask)
        assert miss(off, hf, ids, full) <= HIDDEN_TOL


@pytest.mark.parametrize("wrong", ["none", "power-of-two formula"])
def test_bloom_alibi_slopes_matter(wrong):
    """With 6 heads, the slopes beyond the 4 of the nearest power of two come from the series for 8:
    no ALiBi at all, or the power-of-two formula applied to 6, both miss HF."""
    hf = hf_model(bloom)
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids, mask, _ = batch(pad_id(hf))
    assert miss(ours, hf, ids, mask) <= HIDDEN_TOL
    naive = torch.tensor([2 ** (-8 * (i + 1) / 6) for i in range(6)])
    ours.slopes = torch.zeros(6) if wrong == "none" else naive
    assert not torch.allclose(naive, alibi_slopes(6))
    assert miss(ours, hf, ids, mask) > CLEAR_MARGIN


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 8, 12, 16, 20, 32, 112])
def test_alibi_slopes_equal_hf(heads):
    assert torch.equal(alibi_slopes(heads), _get_alibi_slopes(heads, torch.device("cpu")))


def test_bloom_gelu_is_torch_tanh_gelu_within_float32_rounding():
    """BLOOM writes sqrt(2/pi) as 0.79788456; torch's tanh GELU (ours, "gelu_tanh") differs from it by
    float32 rounding only, far inside the parity bounds."""
    x = torch.linspace(-12, 12, 200_001)
    assert (ACTIVATIONS["gelu_tanh"](x) - bloom_gelu_forward(x)).abs().max() <= 2e-6


@pytest.mark.parametrize("family", ["gpt_neox-parallel", "gpt_neox-sequential", "gpt_neo", "opt",
                                    "opt-350m-style", "bloom", "phi-qk-layernorm-gqa"])
@pytest.mark.parametrize("prompt", [1, (5, 3)])
def test_decoding_with_the_cache_equals_a_full_pass(family, prompt):
    """Partial rotary, GPT-Neo's window, OPT's counted positions and ALiBi's key positions, step by step."""
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    ids = torch.randint(3, VOCAB, (1, 13), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = ours(ids)
        logits, attentions = step_by_step(ours, ids, prompt)
    assert (logits - full.logits[0]).abs().max() <= HIDDEN_TOL
    assert (attentions - full.attentions[:, 0]).abs().max() <= ATTENTION_TOL
    assert (attentions[:, :, -1] - full.attentions[:, 0, :, -1]).abs().max() <= ATTENTION_TOL  # the last step
    with torch.no_grad():  # and the full pass is HF's
        ref = hf(input_ids=ids).logits[0]
    assert (full.logits[0] - ref).abs().max() <= HIDDEN_TOL


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_matches_hf_generate(family):
    """HF's own cached decoding as the reference: the same 10 greedy tokens, with and without our cache."""
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    prompt = torch.randint(3, VOCAB, (1, 5), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        ref = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10, num_beams=1,
                          do_sample=False, eos_token_id=None, pad_token_id=pad_id(hf))
    assert greedy_decode(ours, prompt, 10).tolist() == ref.tolist()
    assert greedy_decode(ours, prompt, 10, use_cache=False).tolist() == ref.tolist()


@pytest.fixture(scope="module")
def tokenizer():
    return bpe_tokenizer(bos=False)


@pytest.mark.parametrize("family", ["gpt_neox-parallel", "gpt_neo", "opt-350m-style", "bloom", "phi",
                                    "phi-qk-layernorm-gqa"])
def test_load_a_saved_folder(family, tokenizer, tmp_path):
    """save_pretrained (safetensors) and a tokenizer, then attnviz.load: the traces match HF eager."""
    import attnviz

    hf = hf_model(lambda: FAMILIES[family](tokenizer.get_vocab_size()))
    hf.save_pretrained(tmp_path)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>",
                               eos_token="<s>").save_pretrained(tmp_path)
    model = attnviz.load(str(tmp_path), device="cpu")
    assert model.info.model_type == hf.config.model_type
    texts = ["The cat sat on the mat.", "A dog ran in the park, and the cat watched the dog from the wall."]
    traces = model.run_batch(texts)  # padded together
    for text, trace in zip(texts, traces):
        ids = torch.tensor([trace.input_ids])
        assert trace.input_ids == tokenizer.encode(text).ids
        with torch.no_grad():
            ref = hf.base_model(input_ids=ids, output_attentions=True)
        assert np.abs(trace.attentions - torch.stack(ref.attentions)[:, 0].numpy()).max() <= ATTENTION_TOL
        assert np.abs(trace.hidden - ref.last_hidden_state[0].numpy()).max() <= HIDDEN_TOL


@pytest.mark.parametrize("family, change, option", [
    ("gpt_neox-parallel", {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 100.0, "factor": 2.0,
                                               "partial_rotary_factor": 0.5}}, "dynamic"),
    ("gpt_neox-parallel", {"rope_parameters": {"rope_type": "default", "rope_theta": 100.0,
                                               "partial_rotary_factor": 0.1}}, "partial_rotary_factor"),
    ("gpt_neo", {"attention_layers": ["global", "sparse", "global"]}, "attention_layers"),
    ("bloom", {"apply_residual_connection_post_layernorm": True}, "apply_residual_connection_post_layernorm"),
    ("opt", {"activation_function": "quick_gelu"}, "quick_gelu"),
])
def test_unsupported_options_are_refused_by_name(family, change, option):
    hf = hf_model(FAMILIES[family])
    with pytest.raises(ValueError, match=option):
        build_module(hf.config.to_dict() | change, hf.state_dict())


def _hub_layout(family: str, state: dict) -> dict:
    """The state dict as the hub's older checkpoints store it: saved mask/rotary buffers (GPT-NeoX, GPT-Neo),
    Pythia's embed_out, OPT's and BLOOM's base-model keys without the task model's prefix."""
    state = dict(state)
    if family.startswith("gpt_neox"):
        state["embed_out.weight"] = state.pop("lm_head.weight")
        for i in range(2):
            state[f"gpt_neox.layers.{i}.attention.bias"] = torch.ones(1, 1, 64, 64, dtype=torch.bool)
            state[f"gpt_neox.layers.{i}.attention.masked_bias"] = torch.tensor(-1e9)
            state[f"gpt_neox.layers.{i}.attention.rotary_emb.inv_freq"] = torch.ones(2)
    if family == "gpt_neo":
        for i in range(3):
            state[f"transformer.h.{i}.attn.attention.bias"] = torch.ones(1, 1, 64, 64, dtype=torch.bool)
            state[f"transformer.h.{i}.attn.attention.masked_bias"] = torch.tensor(-1e9)
    if family.startswith("opt"):  # facebook/opt-*: OPTModel's keys, the tied head left out
        state = {k.removeprefix("model."): v for k, v in state.items() if k != "lm_head.weight"}
        if family == "opt-350m-style":  # a final norm saved by a checkpoint that HF reads without one
            state["decoder.final_layer_norm.weight"] = torch.ones(32)
            state["decoder.final_layer_norm.bias"] = torch.zeros(32)
    if family == "bloom":  # bigscience/bloom-*: BloomModel's keys
        state = {k.removeprefix("transformer."): v for k, v in state.items() if k != "lm_head.weight"}
    return state


@pytest.mark.parametrize("family", ["gpt_neox-parallel", "gpt_neo", "opt", "opt-350m-style", "bloom"])
def test_hub_checkpoint_layouts_convert_alike(family):
    hf = hf_model(FAMILIES[family])
    ours = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    old = build_module(hf.config.to_dict(), _hub_layout(family, hf.state_dict())).eval()
    for key, value in ours.state_dict().items():
        assert torch.equal(value, old.state_dict()[key]), key
