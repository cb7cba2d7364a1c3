"""ModernBERT checkpoints -> our pre-norm encoder: rotary with a global and a local base, local layers seeing
keys within local_attention // 2 either side, a GeGLU MLP from one fused Wi, fused Wqkv, no biases.

HF quirks kept: layer 0 has no attention norm (nn.Identity; the embeddings are already normed); the norms
have no bias by default (norm_bias=False: a zero bias here gives the same LayerNorm); the GeGLU's first half
of Wi goes through the activation and the second half is the gate it multiplies (`input, gate = chunk(2)`,
act(input) * gate), i.e. our GatedMLP's gate_proj and up_proj in that order.
"""

from __future__ import annotations

import torch

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

MLM_ARCHITECTURES = ("ModernBertForMaskedLM",)


def _theta(hf: dict, layer_type: str) -> float:
    params = (hf.get("rope_parameters") or {}).get(layer_type) or {}
    if params.get("rope_type", "default") != "default":
        raise ValueError(f"ModernBERT rope_type {params['rope_type']!r} ({layer_type}) is not supported")
    legacy = {"full_attention": "global_rope_theta", "sliding_attention": "local_rope_theta"}[layer_type]
    return float(params.get("rope_theta") or hf.get(legacy) or (160000.0 if layer_type == "full_attention"
                                                              else 10000.0))


def modernbert_config(hf: dict) -> ModelConfig:
    n_layers = hf["num_hidden_layers"]
    every = hf.get("global_attn_every_n_layers", 3)
    layer_types = hf.get("layer_types") or [
        "sliding_attention" if i % every else "full_attention" for i in range(n_layers)]
    unknown = sorted(set(layer_types) - {"sliding_attention", "full_attention"})
    if unknown:
        raise ValueError(f"ModernBERT layer_types {unknown} are not supported")
    local = hf.get("local_attention", 128)
    has_head = any(a in MLM_ARCHITECTURES for a in hf.get("architectures") or ())
    return ModelConfig(
        family="modernbert",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=n_layers,
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        norm_eps=hf.get("norm_eps", 1e-5),
        norm_placement="pre",
        first_attn_norm=False,
        gated_mlp=True,
        activation=activation(hf.get("hidden_activation", "gelu")),
        max_positions=None,
        rope_theta=_theta(hf, "full_attention"),
        local_rope_theta=_theta(hf, "sliding_attention"),
        layer_windows=tuple(local if kind == "sliding_attention" else None for kind in layer_types),
        pad_token_id=hf.get("pad_token_id"),
        qkv_bias=bool(hf.get("attention_bias", False)),
        out_bias=bool(hf.get("attention_bias", False)),
        mlp_bias=bool(hf.get("mlp_bias", False)),
        embedding_norm=True,
        mlm_head=activation(hf.get("classifier_activation", "gelu")) if has_head else None,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def convert_modernbert(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embeddings.tok_embeddings.weight", ("", "model."))
    w = WeightLedger(checkpoint, prefix)
    c = model.config
    width, d_ff = c.d_model, c.d_ff

    def norm(theirs: str, ours: str) -> None:
        w.move(f"{theirs}.weight", f"{ours}.weight")
        bias = f"{theirs}.bias"
        if w.prefix + bias in checkpoint:
            w.move(bias, f"{ours}.bias")
        else:  # norm_bias=False: HF's LayerNorm has no bias, ours a zero one
            w.put(f"{ours}.bias", torch.zeros(width, dtype=checkpoint[w.prefix + theirs + ".weight"].dtype))

    def linear(theirs: str, ours: list[str], sizes: list[int]) -> None:
        for name, part in zip(ours, w.take(f"{theirs}.weight").split(sizes, dim=0)):
            w.put(f"{name}.weight", part)
        if w.prefix + theirs + ".bias" in checkpoint:
            for name, part in zip(ours, w.take(f"{theirs}.bias").split(sizes, dim=0)):
                w.put(f"{name}.bias", part)

    w.move("embeddings.tok_embeddings.weight", "token_embedding.weight")
    norm("embeddings.norm", "embedding_norm")
    for i in range(c.n_layers):
        hf_layer, ours = f"layers.{i}.", f"blocks.{i}."
        if i > 0:
            norm(f"{hf_layer}attn_norm", f"{ours}attn_norm")
        linear(f"{hf_layer}attn.Wqkv", [f"{ours}attn.q_proj", f"{ours}attn.k_proj", f"{ours}attn.v_proj"],
               [width] * 3)
        linear(f"{hf_layer}attn.Wo", [f"{ours}attn.o_proj"], [width])
        norm(f"{hf_layer}mlp_norm", f"{ours}mlp_norm")
        linear(f"{hf_layer}mlp.Wi", [f"{ours}mlp.gate_proj", f"{ours}mlp.up_proj"], [d_ff, d_ff])
        linear(f"{hf_layer}mlp.Wo", [f"{ours}mlp.down_proj"], [width])
    norm("final_norm", "final_norm")
    if model.mlm_head is not None and "head.dense.weight" in checkpoint:
        w.prefix = ""
        w.move("head.dense.weight", "mlm_head.dense.weight")
        if "head.dense.bias" in checkpoint:
            w.move("head.dense.bias", "mlm_head.dense.bias")
        else:  # classifier_bias=False
            w.put("mlm_head.dense.bias", torch.zeros(width, dtype=checkpoint["head.dense.weight"].dtype))
        norm("head.norm", "mlm_head.norm")
        if c.tie_word_embeddings:
            w.put("mlm_head.decoder.weight", w.converted["token_embedding.weight"])
            w.ignore(r"decoder\.weight")
        else:
            w.move("decoder.weight", "mlm_head.decoder.weight")
        if "decoder.bias" in checkpoint:
            w.move("decoder.bias", "mlm_head.decoder.bias")
        else:  # decoder_bias=False
            w.put("mlm_head.decoder.bias", torch.zeros(c.vocab_size, dtype=checkpoint["head.dense.weight"].dtype))
    elif model.mlm_head is not None:
        model.mlm_head = None  # a masked-LM config over base weights: load the encoder without mask filling
    w.ignore(r"(head|decoder|classifier|drop)\..*")
    return w.finish(model)
