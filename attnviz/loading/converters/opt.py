"""OPT checkpoints -> our decoder with learned positions counted from the attention mask.

What is special: positions are (real tokens so far) - 1 plus an offset of 2 into a table of
max_position_embeddings + 2 rows, so left padding shifts them (positions_from_mask); OPT-350m puts
its norms after the residual (do_layer_norm_before False: post placement, and no final norm) and works
at a narrower word_embed_proj_dim, projected in and out of the model width (project_in/project_out).
HF scales q by head_dim^-0.5 before q.k, as our kernel does.
"""

from __future__ import annotations

import torch

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

POSITION_OFFSET = 2  # HF OPTLearnedPositionalEmbedding.offset
LINEARS = {"self_attn.q_proj": "attn.q_proj", "self_attn.k_proj": "attn.k_proj", "self_attn.v_proj": "attn.v_proj",
           "self_attn.out_proj": "attn.o_proj", "fc1": "mlp.up_proj", "fc2": "mlp.down_proj"}


def opt_config(hf: dict) -> ModelConfig:
    d_model = hf["hidden_size"]
    pre = bool(hf.get("do_layer_norm_before", True))
    proj = hf.get("word_embed_proj_dim") or d_model
    bias = bool(hf.get("enable_bias", True))
    return ModelConfig(
        family="opt",
        vocab_size=hf["vocab_size"],
        d_model=d_model,
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["ffn_dim"],
        causal=True,
        norm_eps=1e-5,  # HF builds nn.LayerNorm with its default eps
        norm_placement="pre" if pre else "post",
        # HF's _remove_final_layer_norm: checkpoints fine-tuned before transformers 4.20.1 have none.
        final_norm=pre and not hf.get("_remove_final_layer_norm", False),
        activation=activation(hf.get("activation_function", "relu")),
        max_positions=hf["max_position_embeddings"] + POSITION_OFFSET,
        position_offset=POSITION_OFFSET,
        positions_from_mask=True,
        pad_token_id=hf.get("pad_token_id"),
        embed_proj_dim=None if proj == d_model else proj,
        qkv_bias=bias,
        out_bias=bias,
        mlp_bias=bias,
        lm_head=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
    )


def convert_opt(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embed_tokens.weight", ("model.decoder.", "decoder."))
    w = WeightLedger(checkpoint, prefix)
    c = model.config
    affine = hf.get("layer_norm_elementwise_affine", True)

    def norm(theirs: str, mine: str) -> None:
        if affine:
            w.move_params({theirs: mine})
        else:  # a LayerNorm without parameters is ours with weight 1 and bias 0
            w.put(f"{mine}.weight", torch.ones(c.d_model))
            w.put(f"{mine}.bias", torch.zeros(c.d_model))

    w.move("embed_tokens.weight", "token_embedding.weight")
    w.move("embed_positions.weight", "position_embedding.weight")
    if c.embed_proj_dim is not None:
        w.move("project_in.weight", "project_in.weight")
        w.move("project_out.weight", "project_out.weight")
    for i in range(c.n_layers):
        layer, ours = f"layers.{i}.", f"blocks.{i}."
        kinds = ("weight", "bias") if c.qkv_bias else ("weight",)
        w.move_params(LINEARS, layer, ours, kinds)
        norm(f"{layer}self_attn_layer_norm", f"{ours}attn_norm")
        norm(f"{layer}final_layer_norm", f"{ours}mlp_norm")
    if c.has_final_norm:
        norm("final_layer_norm", "final_norm")
    else:  # saved by checkpoints HF reads without it (post-norm OPT-350m, _remove_final_layer_norm)
        w.ignore(r"(model\.)?decoder\.final_layer_norm\.(weight|bias)")
    w.unembedding(c.tie_word_embeddings)
    return w.finish(model)
