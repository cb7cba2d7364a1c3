"""GPT-NeoX checkpoints (Pythia, GPT-NeoX-20B) -> our pre-norm decoder with partial rotary and, by default,
a parallel residual: x + attn(ln1(x)) + mlp(ln2(x)), two norms on the same input.

The fused query_key_value is laid out per head: its 3 * C output rows are [H, 3, D] (HF views the
projection as [B, T, H, 3 * D] and chunks each head's 3 * D into q, k, v), not concat(q, k, v).
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.llama_like import decoder_sizes
from attnviz.loading.converters.rotary import rotary_settings
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

NEOX_MLP_AND_NORMS = {"mlp.dense_h_to_4h": "mlp.up_proj", "mlp.dense_4h_to_h": "mlp.down_proj",  # BLOOM's too
                      "input_layernorm": "attn_norm", "post_attention_layernorm": "mlp_norm"}


def gpt_neox_config(hf: dict) -> ModelConfig:
    d_model, n_heads = hf["hidden_size"], hf["num_attention_heads"]
    theta, scaling, rotary_dim = rotary_settings(hf, d_model // n_heads, default_factor=0.25)
    bias = bool(hf.get("attention_bias", True))
    return ModelConfig(
        family="gpt_neox",
        **decoder_sizes(hf),
        norm_eps=hf.get("layer_norm_eps", 1e-5),
        norm_placement="pre",
        residual="parallel" if hf.get("use_parallel_residual", True) else "sequential",
        activation=activation(hf.get("hidden_act", "gelu")),
        rope_theta=theta,
        rope_scaling=scaling,
        rotary_dim=rotary_dim,
        qkv_bias=bias,
        out_bias=bias,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
    )


def split_per_head(fused, n_heads: int):
    """A fused [H * 3 * D, ...] weight or bias laid out [H, 3, D] -> q, k, v, each [H * D, ...]."""
    rest = fused.shape[1:]
    per_head = fused.reshape(n_heads, 3, -1, *rest)  # H, 3, D, ...
    return [per_head[:, i].reshape(-1, *rest).contiguous() for i in range(3)]


def convert_gpt_neox(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embed_in.weight", ("gpt_neox.", ""))
    w = WeightLedger(checkpoint, prefix)
    c = model.config
    w.move("embed_in.weight", "token_embedding.weight")
    for i in range(c.n_layers):
        layer, ours = f"layers.{i}.", f"blocks.{i}."
        kinds = ("weight", "bias") if c.qkv_bias else ("weight",)
        for kind in kinds:
            fused = w.take(f"{layer}attention.query_key_value.{kind}")
            for name, part in zip(("q_proj", "k_proj", "v_proj"), split_per_head(fused, c.n_heads)):
                w.put(f"{ours}attn.{name}.{kind}", part)
            w.move(f"{layer}attention.dense.{kind}", f"{ours}attn.o_proj.{kind}")
        w.move_params(NEOX_MLP_AND_NORMS, layer, ours)
    w.move_params({"final_layer_norm": "final_norm"})
    # Pythia's own checkpoints name the unembedding embed_out; transformers 5 renames it lm_head on load.
    w.unembedding(c.tie_word_embeddings, "embed_out.weight" if "embed_out.weight" in checkpoint else "lm_head.weight")
    # Causal-mask and rotary buffers that old checkpoints saved; recomputed from the config.
    w.ignore(r"(gpt_neox\.)?layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)")
    return w.finish(model)
