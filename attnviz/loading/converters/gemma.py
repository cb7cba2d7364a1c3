"""Gemma 1, 2 and 3 (text) checkpoints -> our decoder with Gemma's (1 + w) RMSNorm, GeGLU and
embeddings times sqrt(d_model).

    Gemma 1  pre-norm (input_layernorm, post_attention_layernorm = the norm before the MLP); MQA or MHA.
    Gemma 2  sandwich norms (input, post_attention, pre_feedforward, post_feedforward); layer_types
             alternate sliding and full (layer 0 sliding); scores scaled by query_pre_attn_scalar^-1/2
             and soft-capped; final logits soft-capped.
    Gemma 3  Gemma 2's block plus q/k RMSNorm per head before rotary; 5 sliding : 1 full layers; the
             sliding layers rotate with their own base (rope_parameters["sliding_attention"]). As in HF,
             attn_logit_softcapping is not applied (HF reads it into the config and no further).

Careful: Gemma 2/3's `post_attention_layernorm` is the norm on the attention output (our attn_post_norm),
while Gemma 1's (as Llama's) is the norm before the MLP (our mlp_norm).

The multimodal wrapper (model_type "gemma3", Gemma3ForConditionalGeneration: Gemma 3 4B and larger)
is read as its text part: its text_config, and the language model's tensors; the vision tower and the
projector are set aside, since attnviz feeds text only.

Transformers' GGUF loader yields a "gemma3_text" config with rope_theta at top level and without
layer_types, query_pre_attn_scalar or the local base; the defaults below are Gemma3TextConfig's, so the
raw dict converts as the finished config does.
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.llama_like import PRE_NORMS, convert_decoder, decoder_sizes
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.rope import SUPPORTED_ROPE_TYPES

SANDWICH = ("gemma2", "gemma3_text")
SANDWICH_NORMS = (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "attn_post_norm"),
                  ("pre_feedforward_layernorm", "mlp_norm"), ("post_feedforward_layernorm", "mlp_post_norm"))
# Gemma3TextConfig's defaults, for configs that leave them out (the GGUF loader's dict)
GEMMA3_DEFAULTS = {"global_theta": 1_000_000.0, "local_theta": 10_000.0, "pattern": 6}


def gemma_config(hf: dict) -> ModelConfig:
    if hf["model_type"] == "gemma3":
        return gemma_config(text_part(hf))
    model_type = hf["model_type"]
    if hf.get("use_bidirectional_attention"):
        raise ValueError(f"{model_type} with use_bidirectional_attention=True (an embedding model) is not supported")
    if hf.get("attention_bias"):
        raise ValueError(f"{model_type} with attention_bias=True is not supported")
    head_dim = hf.get("head_dim") or 256
    # Gemma 1 reads hidden_act (its legacy "gelu" means the tanh form); Gemma 2/3 read hidden_activation.
    if model_type == "gemma":
        act = hf.get("hidden_act") or "gelu_pytorch_tanh"
        act = "gelu_pytorch_tanh" if act == "gelu" else act
    else:
        act = hf.get("hidden_activation") or "gelu_pytorch_tanh"
    common = dict(
        family=model_type,
        **decoder_sizes(hf),
        head_dim=head_dim,
        norm="gemma_rmsnorm",
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        gated_mlp=True,
        activation=activation(act),
        qkv_bias=False,
        out_bias=False,
        mlp_bias=False,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
        embed_scale=hf["hidden_size"]**0.5,
    )
    if model_type == "gemma":
        theta, scaling = _rope(hf.get("rope_parameters") or hf.get("rope_scaling"), hf.get("rope_theta", 10000.0))
        return ModelConfig(**common, norm_placement="pre", rope_theta=theta, rope_scaling=scaling)
    n_layers = hf["num_hidden_layers"]
    pattern = 2 if model_type == "gemma2" else hf.get("sliding_window_pattern", GEMMA3_DEFAULTS["pattern"])
    layer_types = hf.get("layer_types") or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
    unknown = set(layer_types) - {"sliding_attention", "full_attention"}
    if unknown:
        raise ValueError(f"{model_type} layer_types {sorted(unknown)} are not supported")
    window = hf.get("sliding_window", 4096)
    windows = tuple(window if kind == "sliding_attention" else None for kind in layer_types)
    theta, scaling, local_theta = _gemma_ropes(hf)
    return ModelConfig(
        **common,
        norm_placement="sandwich",
        rope_theta=theta,
        rope_scaling=scaling,
        layer_windows=windows,
        local_rope_theta=local_theta,
        attn_scale=float(hf.get("query_pre_attn_scalar", 256)) ** -0.5,
        # HF's Gemma 3 keeps attn_logit_softcapping in its config but never passes it to the attention (no
        # released Gemma 3 sets it): the reference scores are uncapped, so ours are too.
        attn_softcap=hf.get("attn_logit_softcapping") if model_type == "gemma2" else None,
        final_softcap=hf.get("final_logit_softcapping"),
        qk_norm="head" if model_type == "gemma3_text" else None,
    )


def text_part(hf: dict) -> dict:
    """The text config of Gemma 3's multimodal wrapper, as a gemma3_text config."""
    text = dict(hf.get("text_config") or {})
    if not text:
        raise ValueError("gemma3 config without a text_config")
    text["model_type"] = "gemma3_text"
    text.setdefault("tie_word_embeddings", hf.get("tie_word_embeddings", True))
    return text


def _rope(params: dict | None, theta_default: float) -> tuple[float, dict | None]:
    params = params or {}
    theta = float(params.get("rope_theta", theta_default))
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:  # now: Gemma 3's full layers are not the first, whose rotary
        # the module builds up front, so an unknown type would surface only at the first forward pass
        raise ValueError(f"rope_type {rope_type!r} is not implemented; supported: {', '.join(SUPPORTED_ROPE_TYPES)}")
    return theta, None if rope_type == "default" else {**params, "rope_type": rope_type}


def _gemma_ropes(hf: dict) -> tuple[float, dict | None, float | None]:
    """(global theta, global scaling, local theta). Gemma 2 has one rotary for every layer; Gemma 3's
    sliding layers have their own base (transformers 5: rope_parameters["sliding_attention"], older
    configs: rope_local_base_freq)."""
    params = hf.get("rope_parameters") or {}
    if hf["model_type"] == "gemma2":
        theta, scaling = _rope(params or hf.get("rope_scaling"), hf.get("rope_theta", 10000.0))
        return theta, scaling, None
    if "full_attention" in params or "sliding_attention" in params:
        full, sliding = params.get("full_attention") or {}, params.get("sliding_attention") or {}
    else:  # one flat dict (or none: the GGUF loader's rope_theta at top level) is the global rotary's
        full, sliding = params or dict(hf.get("rope_scaling") or {}), {}
    theta, scaling = _rope(full, hf.get("rope_theta", GEMMA3_DEFAULTS["global_theta"]))
    local, local_scaling = _rope(sliding, hf.get("rope_local_base_freq", GEMMA3_DEFAULTS["local_theta"]))
    if local_scaling is not None:
        raise ValueError(f"gemma3 sliding-layer rope_type {local_scaling['rope_type']!r} is not supported "
                         "(only the default rotary on sliding layers)")
    return theta, scaling, local


def convert_gemma(hf: dict, checkpoint: dict, model) -> dict:
    if hf["model_type"] == "gemma3":
        return _convert_wrapper(hf, checkpoint, model)
    prefix = detect_prefix(checkpoint, "embed_tokens.weight", ("model.", ""))
    return _convert(hf["model_type"], WeightLedger(checkpoint, prefix), model)


def _convert_wrapper(hf: dict, checkpoint: dict, model) -> dict:
    """Gemma3ForConditionalGeneration: transformers 5 saves model.language_model.*, hub checkpoints
    (and older transformers) language_model.model.*; the unembedding is tied to the text embedding."""
    prefix = detect_prefix(checkpoint, "embed_tokens.weight", ("model.language_model.", "language_model.model."))
    w = WeightLedger(checkpoint, prefix)
    w.ignore(r"(model\.)?(vision_tower|multi_modal_projector)\..*")
    w.ignore(r"language_model\.lm_head\.weight")  # older saves: tied to the embedding, dropped like lm_head
    return _convert("gemma3_text", w, model)


def _convert(model_type: str, w: WeightLedger, model) -> dict:
    return convert_decoder(w, model, SANDWICH_NORMS if model_type in SANDWICH else PRE_NORMS)
