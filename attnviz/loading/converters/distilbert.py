"""DistilBERT checkpoints -> our post-norm encoder (no token types)."""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig


def distilbert_config(hf: dict) -> ModelConfig:
    return ModelConfig(
        family="distilbert",
        vocab_size=hf["vocab_size"],
        d_model=hf["dim"],
        n_layers=hf["n_layers"],
        n_heads=hf["n_heads"],
        d_ff=hf["hidden_dim"],
        norm_eps=1e-12,  # hard-coded in HF's DistilBERT
        activation=activation(hf.get("activation", "gelu")),
        max_positions=hf["max_position_embeddings"],
        pad_token_id=hf.get("pad_token_id"),
        embedding_norm=True,
        # DistilBertForMaskedLM: vocab_transform, the config's activation, vocab_layer_norm, vocab_projector.
        mlm_head=activation(hf.get("activation", "gelu")) if has_mlm_head(hf) else None,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def has_mlm_head(hf: dict) -> bool:
    return "DistilBertForMaskedLM" in (hf.get("architectures") or ())


def convert_distilbert(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "distilbert."))
    w = WeightLedger(checkpoint, prefix)
    w.move("embeddings.word_embeddings.weight", "token_embedding.weight")
    w.move("embeddings.position_embeddings.weight", "position_embedding.weight")
    for p in ("weight", "bias"):
        w.move(f"embeddings.LayerNorm.{p}", f"embedding_norm.{p}")
    names = {
        "attention.q_lin": "attn.q_proj",
        "attention.k_lin": "attn.k_proj",
        "attention.v_lin": "attn.v_proj",
        "attention.out_lin": "attn.o_proj",
        "sa_layer_norm": "attn_norm",
        "ffn.lin1": "mlp.up_proj",
        "ffn.lin2": "mlp.down_proj",
        "output_layer_norm": "mlp_norm",
    }
    for i in range(model.config.n_layers):
        for theirs, ours in names.items():
            for p in ("weight", "bias"):
                w.move(f"transformer.layer.{i}.{theirs}.{p}", f"blocks.{i}.{ours}.{p}")
    if model.mlm_head is not None and "vocab_transform.weight" in checkpoint:
        w.prefix = ""  # the head lives outside the base model's prefix
        for theirs, ours in (("vocab_transform", "dense"), ("vocab_layer_norm", "norm")):
            for p in ("weight", "bias"):
                w.move(f"{theirs}.{p}", f"mlm_head.{ours}.{p}")
        w.move("vocab_projector.bias", "mlm_head.decoder.bias")
        if model.config.tie_word_embeddings:
            w.put("mlm_head.decoder.weight", w.converted["token_embedding.weight"])
        else:
            w.move("vocab_projector.weight", "mlm_head.decoder.weight")
    elif model.mlm_head is not None:
        model.mlm_head = None  # a masked-LM config over base weights: the encoder, without mask filling
    w.ignore(r"(distilbert\.)?embeddings\.position_ids")
    w.ignore(r"(vocab_transform|vocab_layer_norm|vocab_projector|pre_classifier|classifier|qa_outputs)\..*")
    return w.finish(model)
