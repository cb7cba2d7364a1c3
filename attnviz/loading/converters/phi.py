"""Phi 1 / 1.5 / 2 checkpoints -> our decoder with attention and MLP side by side on ONE shared norm:
x + attn(ln(x)) + mlp(ln(x)) (residual "parallel_shared").

Also special: partial rotary (partial_rotary_factor of each head, 0.5 by default), an optional
LayerNorm per head on queries and keys before rotary (qk_layernorm), biases everywhere, a final
LayerNorm, and an unembedding with a bias.
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.llama_like import decoder_sizes
from attnviz.loading.converters.rotary import rotary_settings
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig

LAYER = {"self_attn.q_proj": "attn.q_proj", "self_attn.k_proj": "attn.k_proj", "self_attn.v_proj": "attn.v_proj",
         "self_attn.dense": "attn.o_proj", "mlp.fc1": "mlp.up_proj", "mlp.fc2": "mlp.down_proj",
         "input_layernorm": "attn_norm"}


def phi_config(hf: dict) -> ModelConfig:
    d_model, n_heads = hf["hidden_size"], hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or d_model // n_heads
    if hf.get("qk_layernorm") and head_dim != d_model // n_heads:
        raise ValueError("Phi with qk_layernorm and a head_dim other than hidden_size // num_attention_heads is "
                         "not supported (HF sizes its q/k norms by the latter)")
    theta, scaling, rotary_dim = rotary_settings(hf, head_dim, default_factor=0.5)
    return ModelConfig(
        family="phi",
        **decoder_sizes(hf),
        head_dim=hf.get("head_dim"),
        norm_eps=hf.get("layer_norm_eps", 1e-5),
        norm_placement="pre",
        residual="parallel_shared",
        activation=activation(hf.get("hidden_act", "gelu_new")),
        rope_theta=theta,
        rope_scaling=scaling,
        rotary_dim=rotary_dim,
        qk_norm="head" if hf.get("qk_layernorm") else None,
        lm_head_bias=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
    )


def convert_phi(hf: dict, checkpoint: dict, model) -> dict:
    w = WeightLedger(checkpoint, "model.")
    c = model.config
    w.move("embed_tokens.weight", "token_embedding.weight")
    for i in range(c.n_layers):
        layer, ours = f"layers.{i}.", f"blocks.{i}."
        w.move_params(LAYER, layer, ours)
        if c.qk_norm is not None:
            w.move_params({"self_attn.q_layernorm": "attn.q_norm", "self_attn.k_layernorm": "attn.k_norm"}, layer, ours)
    w.move_params({"final_layernorm": "final_norm"})
    w.unembedding(c.tie_word_embeddings)
    w.prefix = ""  # the head, and its bias, sit outside the base model's prefix
    w.move("lm_head.bias", "lm_head.bias")
    return w.finish(model)
