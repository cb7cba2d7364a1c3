"""BERT and RoBERTa checkpoints -> our post-norm encoder (BertModel key layout)."""

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

# Architectures whose checkpoints carry a masked-LM head (BertForPreTraining adds next-sentence
# prediction, which the app does not use).
MLM_ARCHITECTURES = ("BertForMaskedLM", "BertForPreTraining", "RobertaForMaskedLM", "XLMRobertaForMaskedLM")
# The heads' names: BERT's cls.predictions.* and RoBERTa's lm_head.*. Some checkpoints store the decoder bias
# twice (`predictions.bias` and `decoder.bias`, tied): the first is taken.
BERT_HEAD = dict(dense="cls.predictions.transform.dense", norm="cls.predictions.transform.LayerNorm",
                 biases=("cls.predictions.bias", "cls.predictions.decoder.bias"),
                 decoder="cls.predictions.decoder.weight")
ROBERTA_HEAD = dict(dense="lm_head.dense", norm="lm_head.layer_norm", biases=("lm_head.bias", "lm_head.decoder.bias"),
                    decoder="lm_head.decoder.weight")


def bert_config(hf: dict) -> ModelConfig:
    roberta = hf["model_type"] in ("roberta", "xlm-roberta")
    layout = bert_layout(hf, "")
    return ModelConfig(
        family="roberta" if roberta else "bert",
        **layout,
        # HF's create_position_ids_from_input_ids: positions start at padding_idx + 1.
        position_offset=hf["pad_token_id"] + 1 if roberta else 0,
        # RoBERTa's lm_head applies gelu whatever hidden_act says; BERT's transform uses hidden_act.
        mlm_head=(("gelu" if roberta else layout["activation"]) if has_architecture(hf, MLM_ARCHITECTURES) else None),
    )


def convert_bert(hf: dict, checkpoint: dict, model) -> dict:
    checkpoint = modern_norm_names(checkpoint)
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "bert.", "roberta."))
    w = WeightLedger(checkpoint, prefix)
    move_embeddings(w)
    move_bert_layers(w, model.config.n_layers)
    move_mlm_head(w, model, **(ROBERTA_HEAD if model.config.family == "roberta" else BERT_HEAD))
    # Task heads and buffers the attention view does not use.
    w.ignore(r"(bert\.|roberta\.)?(pooler\..*|embeddings\.(position_ids|token_type_ids))")
    w.ignore(r"(cls|lm_head|classifier|qa_outputs)\..*")
    return w.finish(model)
