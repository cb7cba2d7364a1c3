"""GPT-2 checkpoints -> our pre-norm decoder.

GPT-2 stores its projections as Conv1D, weight [in, out], so they are transposed for nn.Linear; the
fused c_attn is concat(q, k, v) along its output dimension.
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

GPT2_NORMS = {"ln_1": "attn_norm", "ln_2": "mlp_norm"}  # GPT-Neo's too


def gpt2_config(hf: dict) -> ModelConfig:
    if hf.get("scale_attn_by_inverse_layer_idx") or hf.get("add_cross_attention"):
        raise ValueError("GPT-2 variants with inverse-layer scaling or cross-attention are not supported")
    if not hf.get("scale_attn_weights", True):
        raise ValueError("GPT-2 with scale_attn_weights=False is not supported")
    d_model = hf["n_embd"]
    return ModelConfig(
        family="gpt2",
        vocab_size=hf["vocab_size"],
        d_model=d_model,
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * d_model,
        causal=True,
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_placement="pre",
        activation=activation(hf.get("activation_function", "gelu_new")),
        max_positions=hf["n_positions"],
        lm_head=True,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def convert_gpt2(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "wte.weight", ("", "transformer."))
    w = WeightLedger(checkpoint, prefix)
    d_model = model.config.d_model
    w.move("wte.weight", "token_embedding.weight")
    w.move("wpe.weight", "position_embedding.weight")
    for i in range(model.config.n_layers):
        h, ours = f"h.{i}.", f"blocks.{i}."
        q, k, v = w.take(f"{h}attn.c_attn.weight").t().split(d_model, dim=0)  # each [C, C]
        qb, kb, vb = w.take(f"{h}attn.c_attn.bias").split(d_model)
        for name, weight, bias in (("q_proj", q, qb), ("k_proj", k, kb), ("v_proj", v, vb)):
            w.put(f"{ours}attn.{name}.weight", weight.contiguous())
            w.put(f"{ours}attn.{name}.bias", bias)
        for theirs, mine in (("attn.c_proj", "attn.o_proj"), ("mlp.c_fc", "mlp.up_proj"),
                             ("mlp.c_proj", "mlp.down_proj")):
            w.put(f"{ours}{mine}.weight", w.take(f"{h}{theirs}.weight").t().contiguous())
            w.move(f"{h}{theirs}.bias", f"{ours}{mine}.bias")
        w.move_params(GPT2_NORMS, h, ours)
    w.move_params({"ln_f": "final_norm"})
    w.unembedding(model.config.tie_word_embeddings)
    # Causal-mask buffers saved by old versions of HF's GPT2Attention.
    w.ignore(r"(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)")
    return w.finish(model)
