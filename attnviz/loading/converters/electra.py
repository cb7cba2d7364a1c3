"""ELECTRA checkpoints -> our post-norm encoder (BERT's layers): the discriminator (ElectraModel) and the
generator (ElectraForMaskedLM, whose masked-LM head fills masks).

Embeddings are embedding_size wide (token, position, type and their LayerNorm); when that differs from
hidden_size, `embeddings_project` (a Linear with bias) maps them in. The generator's head: dense to
embedding_size, gelu (whatever hidden_act says: HF's ElectraGeneratorPredictions), LayerNorm, then
generator_lm_head (tied to the token embedding by default).
"""

from __future__ import annotations

import re

from attnviz.loading.converters.bert import _modern_norm_name, bert_layout, move_bert_layers
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

MLM_ARCHITECTURES = ("ElectraForMaskedLM",)


def electra_config(hf: dict) -> ModelConfig:
    layout = bert_layout(hf, "ELECTRA ")
    width = hf.get("embedding_size") or hf["hidden_size"]
    has_head = any(a in MLM_ARCHITECTURES for a in hf.get("architectures") or ())
    return ModelConfig(
        family="electra",
        **layout,
        embedding_size=width if width != hf["hidden_size"] else None,
        mlm_head="gelu" if has_head else None,
    )


def convert_electra(hf: dict, checkpoint: dict, model) -> dict:
    checkpoint = {_modern_norm_name(k): v for k, v in checkpoint.items()}
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "electra."))
    w = WeightLedger(checkpoint, prefix)
    w.move("embeddings.word_embeddings.weight", "token_embedding.weight")
    w.move("embeddings.position_embeddings.weight", "position_embedding.weight")
    w.move("embeddings.token_type_embeddings.weight", "type_embedding.weight")
    for p in ("weight", "bias"):
        w.move(f"embeddings.LayerNorm.{p}", f"embedding_norm.{p}")
        if model.embedding_project is not None:
            w.move(f"embeddings_project.{p}", f"embedding_project.{p}")
    move_bert_layers(w, model.config.n_layers)
    if model.mlm_head is not None and "generator_predictions.dense.weight" in checkpoint:
        w.prefix = ""
        for theirs, ours in (("dense", "dense"), ("LayerNorm", "norm")):
            for p in ("weight", "bias"):
                w.move(f"generator_predictions.{theirs}.{p}", f"mlm_head.{ours}.{p}")
        w.move("generator_lm_head.bias", "mlm_head.decoder.bias")
        if model.config.tie_word_embeddings:
            w.put("mlm_head.decoder.weight", w.converted["token_embedding.weight"])
            w.ignore(re.escape("generator_lm_head.weight"))
        else:
            w.move("generator_lm_head.weight", "mlm_head.decoder.weight")
    elif model.mlm_head is not None:
        model.mlm_head = None  # a generator config over base weights: the encoder, without mask filling
    w.ignore(r"(electra\.)?embeddings\.(position_ids|token_type_ids)")
    w.ignore(r"(generator_predictions|generator_lm_head|discriminator_predictions|classifier|qa_outputs|"
             r"sequence_summary)\..*")
    return w.finish(model)
