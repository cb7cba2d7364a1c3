"""ALBERT checkpoints -> our post-norm encoder with factorised embeddings and one shared layer.

Embeddings (token, position, type) and their LayerNorm are embedding_size wide, mapped into hidden_size by
encoder.embedding_hidden_mapping_in (a Linear with bias). Every layer runs the same weights
(albert_layer_groups.0.albert_layers.0): our module holds one Block n_layers times, so head ablation and
the recorder still see n_layers layers. Only num_hidden_groups = inner_group_num = 1 (every released
ALBERT) is supported. The MLM head (predictions.*): dense to embedding_size, hidden_act, LayerNorm, decoder.
"""

from __future__ import annotations

from attnviz.loading.converters.bert_like import bert_layout, has_architecture, move_embeddings, move_mlm_head
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

MLM_ARCHITECTURES = ("AlbertForMaskedLM", "AlbertForPreTraining")
LAYER = "encoder.albert_layer_groups.0.albert_layers.0."  # the one layer every layer runs
NAMES = {"attention.query": "attn.q_proj", "attention.key": "attn.k_proj", "attention.value": "attn.v_proj",
         "attention.dense": "attn.o_proj", "attention.LayerNorm": "attn_norm", "ffn": "mlp.up_proj",
         "ffn_output": "mlp.down_proj", "full_layer_layer_norm": "mlp_norm"}


def albert_config(hf: dict) -> ModelConfig:
    for option in ("num_hidden_groups", "inner_group_num"):
        if hf.get(option, 1) != 1:
            raise ValueError(f"ALBERT with {option}={hf[option]} is not supported (only 1)")
    layout = bert_layout(hf, "ALBERT ", default_act="gelu_new")
    return ModelConfig(
        family="albert",
        **layout,
        # ALBERT always maps embeddings in, even when embedding_size == hidden_size.
        embedding_size=hf.get("embedding_size") or hf["hidden_size"],
        shared_layers=True,
        mlm_head=layout["activation"] if has_architecture(hf, MLM_ARCHITECTURES) else None,
    )


def convert_albert(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "albert."))
    w = WeightLedger(checkpoint, prefix)
    move_embeddings(w)
    for p in ("weight", "bias"):
        w.move(f"encoder.embedding_hidden_mapping_in.{p}", f"embedding_project.{p}")
        for theirs, ours in NAMES.items():
            tensor = w.take(f"{LAYER}{theirs}.{p}")
            for i in range(model.config.n_layers):  # one module: every layer's name holds the same tensor
                w.put(f"blocks.{i}.{ours}.{p}", tensor)
    move_mlm_head(w, model, dense="predictions.dense", norm="predictions.LayerNorm",
                  biases=("predictions.bias", "predictions.decoder.bias"), decoder="predictions.decoder.weight")
    w.ignore(r"(albert\.)?embeddings\.(position_ids|token_type_ids)")
    w.ignore(r"(albert\.)?pooler\..*")
    w.ignore(r"(predictions|sop_classifier|classifier|qa_outputs)\..*")
    return w.finish(model)
