"""BLOOM checkpoints -> our pre-norm decoder with ALiBi instead of position embeddings.

What is special: no position embeddings, each head adds slope_h * (key position among the real tokens)
to its scores (attnviz.transformer.alibi, as HF's build_alibi_tensor); a LayerNorm right after the word
embeddings; the fused query_key_value laid out per head, [H, 3, D], as GPT-NeoX's; the MLP is 4x wide
with BLOOM's tanh-approximated GELU (constant 0.79788456 for sqrt(2/pi): ours is torch's tanh GELU,
equal to within float32 rounding).
"""

from __future__ import annotations

from attnviz.loading.converters.gpt_neox import NEOX_MLP_AND_NORMS, split_per_head
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig


def bloom_config(hf: dict) -> ModelConfig:
    if hf.get("apply_residual_connection_post_layernorm"):
        raise ValueError("BLOOM with apply_residual_connection_post_layernorm=True is not supported")
    d_model = hf.get("hidden_size") or hf["n_embed"]
    return ModelConfig(
        family="bloom",
        vocab_size=hf["vocab_size"],
        d_model=d_model,
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=4 * d_model,  # HF BloomMLP is always 4 * hidden_size wide
        causal=True,
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_placement="pre",
        activation="gelu_tanh",
        max_positions=None,
        alibi=True,
        embedding_norm=True,
        lm_head=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
    )


def convert_bloom(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "word_embeddings.weight", ("transformer.", ""))
    w = WeightLedger(checkpoint, prefix)
    c = model.config
    w.move("word_embeddings.weight", "token_embedding.weight")
    w.move_params({"word_embeddings_layernorm": "embedding_norm"})
    for i in range(c.n_layers):
        h, ours = f"h.{i}.", f"blocks.{i}."
        for kind in ("weight", "bias"):
            fused = w.take(f"{h}self_attention.query_key_value.{kind}")
            for name, part in zip(("q_proj", "k_proj", "v_proj"), split_per_head(fused, c.n_heads)):
                w.put(f"{ours}attn.{name}.{kind}", part)
        w.move_params({"self_attention.dense": "attn.o_proj", **NEOX_MLP_AND_NORMS}, h, ours)
    w.move_params({"ln_f": "final_norm"})
    w.unembedding(c.tie_word_embeddings)
    return w.finish(model)
