"""DistilBERT checkpoints -> our post-norm encoder (no token types)."""

from __future__ import annotations

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.bert_like import has_architecture, move_embeddings, move_mlm_head
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
        mlm_head=activation(hf.get("activation", "gelu")) if has_architecture(hf, ("DistilBertForMaskedLM",)) else None,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def convert_distilbert(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "distilbert."))
    w = WeightLedger(checkpoint, prefix)
    move_embeddings(w, types=False)
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
        w.move_params(names, f"transformer.layer.{i}.", f"blocks.{i}.")
    move_mlm_head(w, model, dense="vocab_transform", norm="vocab_layer_norm", biases=("vocab_projector.bias",),
                  decoder="vocab_projector.weight")
    w.ignore(r"(distilbert\.)?embeddings\.position_ids")
    w.ignore(r"(vocab_transform|vocab_layer_norm|vocab_projector|pre_classifier|classifier|qa_outputs)\..*")
    return w.finish(model)
