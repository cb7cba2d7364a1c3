"""Tiny random Hugging Face models (float32, eager attention) and the parity comparison that the parity,
lens, variant and device-map tests share: factories per family, `hf_model` (seeded, every tensor nudged off
its init), `batch` (a right-padded pair of id rows) and `assert_parity` (docs/numerics.md's bounds)."""

from __future__ import annotations

import torch
import transformers as tf
from tokenizers import Tokenizer

from attnviz.loading import build_module
from attnviz.models.loaded_model import LoadedModel, ModelInfo

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


SHORT = [1.0, 1.25, 1.5, 2.0]  # LongRoPE factors for 4 rotated pairs (head_dim 8)
LONG = [1.0, 3.0, 9.0, 27.0]


def phi3(n_kv=2, original=8, rope=True, partial=1.0, **extra):
    pairs = int(8 * partial) // 2
    rope_parameters = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": SHORT[:pairs],
                       "long_factor": LONG[:pairs], "partial_rotary_factor": partial} if rope else None
    return lambda: tf.Phi3ForCausalLM(tf.Phi3Config(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=n_kv,
        intermediate_size=37, max_position_embeddings=64, original_max_position_embeddings=original,
        rope_parameters=rope_parameters, pad_token_id=0, **extra))


def mixtral(sliding_window=None, **extra):
    return lambda: tf.MixtralForCausalLM(tf.MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=24, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
        sliding_window=sliding_window, **extra))


# The real gpt-oss rope parameters (openai/gpt-oss-20b and -120b config.json).
GPT_OSS_ROPE = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                "original_max_position_embeddings": 4096, "truncate": False}


def gpt_oss(n_layers=3, sliding_window=4, swiglu_limit=0.05, **extra):
    return lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=131072, sliding_window=sliding_window, swiglu_limit=swiglu_limit,
        rope_parameters=dict(GPT_OSS_ROPE), **extra))


GQA = dict(num_key_value_heads=2)
# DeepSeek's MLA and MoE, small: a latent of 16 for 4 heads of 12 no-rope + 8 rope dims and values of 10, 8
# experts in 4 groups (2 groups kept, 2 experts a token), the first layer dense.
DEEPSEEK = dict(num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=12, qk_rope_head_dim=8, v_head_dim=10,
                moe_intermediate_size=12, n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
                first_k_dense_replace=1)
COMMON = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
EXTRA = {
    "llama": GQA, "qwen2": GQA, "phi3": GQA,
    "mistral": GQA | dict(sliding_window=4),
    "mixtral": GQA | dict(num_local_experts=4, num_experts_per_tok=2),
    "gpt_oss": GQA | dict(num_local_experts=4, num_experts_per_tok=2, head_dim=8, sliding_window=4,
                          layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gemma": dict(num_key_value_heads=1, head_dim=8),
    "gemma2": GQA | dict(head_dim=8, sliding_window=4, query_pre_attn_scalar=8, attn_logit_softcapping=5.0,
                         final_logit_softcapping=5.0),
    "gemma3_text": GQA | dict(head_dim=8, sliding_window=4, layer_types=["sliding_attention", "full_attention",
                                                                        "sliding_attention"]),
    "qwen3": GQA | dict(head_dim=8), "olmo2": GQA,
    "smollm3": GQA | dict(no_rope_layers=[1, 0, 1]),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1], [["global"], 1]], window_size=4),
    "opt": dict(ffn_dim=37, word_embed_proj_dim=32),
    "gpt_neox": dict(rotary_pct=0.5),
    "phi": dict(partial_rotary_factor=0.5),
    "modernbert": dict(local_attention=4, cls_token_id=1, sep_token_id=2),
    "deberta": dict(relative_attention=True, pos_att_type="c2p|p2c", position_biased_input=False,
                    max_relative_positions=4),
    "deberta-v2": dict(relative_attention=True, pos_att_type="p2c|c2p", position_biased_input=False, position_buckets=4,
                       max_relative_positions=16, share_att_key=True, norm_rel_ebd="layer_norm"),
    "electra": dict(embedding_size=16), "albert": dict(embedding_size=16),
    "deepseek_v2": DEEPSEEK | dict(q_lora_rank=None, n_shared_experts=2, topk_method="group_limited_greedy"),
    "deepseek_v3": DEEPSEEK | dict(q_lora_rank=24, n_shared_experts=1, routed_scaling_factor=2.5),
}


def deepseek(version: int = 3, **extra):
    """A tiny DeepSeek-V2 or V3 causal LM (COMMON and DEEPSEEK, with positions up to 256); `extra` overrides."""
    settings = {**COMMON, "max_position_embeddings": 256, **DEEPSEEK, **extra}
    if version == 2:
        return lambda: tf.DeepseekV2ForCausalLM(tf.DeepseekV2Config(**settings))
    return lambda: tf.DeepseekV3ForCausalLM(tf.DeepseekV3Config(**settings))


def tiny(model_type: str):
    """Our module for one registered model type, converted from a tiny random HF model of its own config class
    (COMMON, and EXTRA where the family needs more to make its feature bite)."""
    return tiny_pair(model_type)[0]


def tiny_hf_model(model_type: str):
    """The HF model (eager) that `tiny(model_type)` converts, for tests that hook HF's own modules."""
    return tiny_pair(model_type)[1]


def tiny_pair(model_type: str):
    """(our module, the HF eager model it was converted from), as `tiny` builds them."""
    torch.manual_seed(0)
    config = tf.AutoConfig.for_model(model_type, **COMMON, **EXTRA.get(model_type, {}))
    config._attn_implementation = "eager"
    try:
        hf = tf.AutoModelForCausalLM.from_config(config)
    except ValueError:  # an encoder without a causal-LM class
        hf = tf.AutoModel.from_config(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return build_module(config.to_dict(), hf.state_dict()).eval(), hf.eval()


def block_bytes(model) -> int:
    """Bytes of a loaded model's first block in float32: the unit the split tests size `max_memory` in."""
    return sum(p.numel() * 4 for p in model.module.blocks[0].parameters())


def tiny_mlm(family: str, tokenizer: Tokenizer):
    """A tiny random BERT or RoBERTa masked-LM (HF eager) over `tokenizer`'s vocabulary."""
    vocab = tokenizer.get_vocab_size()
    common = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64, pad_token_id=2)
    torch.manual_seed(0)
    if family == "bert":
        # gelu_new in the transform: the head must follow hidden_act, not assume gelu.
        hf = tf.BertForMaskedLM(tf.BertConfig(hidden_act="gelu_new", **common))
        hf.config.architectures = ["BertForMaskedLM"]
    else:
        hf = tf.RobertaForMaskedLM(tf.RobertaConfig(type_vocab_size=1, **common))
        hf.config.architectures = ["RobertaForMaskedLM"]
    hf.config._attn_implementation = "eager"
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.eval()
    return hf


def tiny_decoder(family: str, tokenizer: Tokenizer, seed: int, **llama_settings):
    """(our LoadedModel, HF's eager model) on the same random weights: a 2-layer GPT-2, or a 2-layer Llama with
    4 query heads over 2 KV heads and `llama_settings` added to its config, over `tokenizer`'s vocabulary."""
    vocab = tokenizer.get_vocab_size()
    torch.manual_seed(seed)
    if family == "gpt2":
        hf = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=64))
    else:
        hf = tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            **llama_settings))
    hf.config._attn_implementation = "eager"
    with torch.no_grad():  # random init leaves biases at 0 and norms at 1: make every tensor count
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.eval()
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    info = ModelInfo.describe(module, f"tiny {family}", "(test)", family, 64)
    return LoadedModel(module, tokenizer, info, {"pad_token": "<pad>"}), hf
