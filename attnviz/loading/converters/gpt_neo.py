"""GPT-Neo checkpoints -> our pre-norm decoder with learned positions and global/local layers.

What differs from GPT-2: `attention_types` alternates full ("global") and windowed ("local") causal
attention layer by layer, the local window keeping the last `window_size` keys; the scores are not
scaled by 1/sqrt(d) (attn_scale 1.0); q, k, v have no bias, out_proj has one; projections are nn.Linear.
"""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.gpt2 import GPT2_NORMS
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig


def attention_layers(hf: dict) -> list[str]:
    """Each layer's kind, as HF's expand_attention_types_params: [[["global", "local"], 12]] -> 24 layers."""
    if hf.get("attention_layers"):
        return list(hf["attention_layers"])
    kinds = []
    for pattern, repeat in hf.get("attention_types") or [[["global", "local"], 12]]:
        kinds.extend(list(pattern) * repeat)
    return kinds


def gpt_neo_config(hf: dict) -> ModelConfig:
    n_layers, d_model = hf["num_layers"], hf["hidden_size"]
    kinds = attention_layers(hf)
    unknown = sorted(set(kinds) - {"global", "local"})
    if unknown or len(kinds) != n_layers:
        raise ValueError(f"GPT-Neo attention_layers {kinds} must name 'global' or 'local' for each of "
                         f"{n_layers} layers")
    window = hf.get("window_size", 256)
    return ModelConfig(
        family="gpt_neo",
        vocab_size=hf["vocab_size"],
        d_model=d_model,
        n_layers=n_layers,
        n_heads=hf["num_heads"],
        d_ff=hf.get("intermediate_size") or 4 * d_model,
        causal=True,
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        norm_placement="pre",
        activation=activation(hf.get("activation_function", "gelu_new")),
        max_positions=hf["max_position_embeddings"],
        layer_windows=tuple(window if kind == "local" else None for kind in kinds),
        attn_scale=1.0,  # GPT-Neo never divides q.k by sqrt(d)
        qkv_bias=False,
        out_bias=True,
        lm_head=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
    )


def convert_gpt_neo(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "wte.weight", ("transformer.", ""))
    w = WeightLedger(checkpoint, prefix)
    w.move("wte.weight", "token_embedding.weight")
    w.move("wpe.weight", "position_embedding.weight")
    for i in range(model.config.n_layers):
        h, ours = f"h.{i}.", f"blocks.{i}."
        for name in ("q_proj", "k_proj", "v_proj"):
            w.move(f"{h}attn.attention.{name}.weight", f"{ours}attn.{name}.weight")
        w.move_params({"attn.attention.out_proj": "attn.o_proj", "mlp.c_fc": "mlp.up_proj",
                       "mlp.c_proj": "mlp.down_proj", **GPT2_NORMS}, h, ours)
    w.move_params({"ln_f": "final_norm"})
    w.unembedding(model.config.tie_word_embeddings)
    # The causal/local mask buffers that old checkpoints saved; rebuilt from the config.
    w.ignore(r"(transformer\.)?h\.\d+\.attn\.attention\.(bias|masked_bias)")
    return w.finish(model)
