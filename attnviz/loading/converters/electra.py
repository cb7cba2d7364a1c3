"""ELECTRA checkpoints -> our post-norm encoder (BERT's layers): the discriminator (ElectraModel) and the
generator (ElectraForMaskedLM, whose masked-LM head fills masks).

Embeddings are embedding_size wide (token, position, type and their LayerNorm); when that differs from
hidden_size, `embeddings_project` (a Linear with bias) maps them in. The generator's head: dense to
embedding_size, gelu (whatever hidden_act says: HF's ElectraGeneratorPredictions), LayerNorm, then
generator_lm_head (tied to the token embedding by default).
"""

from __future__ import annotations

from attnviz.loading.converters.bert_like import (
    bert_layout,
    has_architecture,
    modern_norm_names,
    move_bert_layers,
    move_embeddings,
    move_mlm_head,
)
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

MLM_ARCHITECTURES = ("ElectraForMaskedLM",)


def electra_config(hf: dict) -> ModelConfig:
    layout = bert_layout(hf, "ELECTRA ")
    width = hf.get("embedding_size") or hf["hidden_size"]
    return ModelConfig(
        family="electra",
        **layout,
        embedding_size=width if width != hf["hidden_size"] else None,
        mlm_head="gelu" if has_architecture(hf, MLM_ARCHITECTURES) else None,
    )


def convert_electra(hf: dict, checkpoint: dict, model) -> dict:
    checkpoint = modern_norm_names(checkpoint)
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "electra."))
    w = WeightLedger(checkpoint, prefix)
    move_embeddings(w)
    if model.embedding_project is not None:
        for p in ("weight", "bias"):
            w.move(f"embeddings_project.{p}", f"embedding_project.{p}")
    move_bert_layers(w, model.config.n_layers)
    move_mlm_head(w, model, dense="generator_predictions.dense", norm="generator_predictions.LayerNorm",
                  biases=("generator_lm_head.bias",), decoder="generator_lm_head.weight")
    w.ignore(r"(electra\.)?embeddings\.(position_ids|token_type_ids)")
    w.ignore(r"(generator_predictions|generator_lm_head|discriminator_predictions|classifier|qa_outputs|"
             r"sequence_summary)\..*")
    return w.finish(model)
