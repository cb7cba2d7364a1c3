"""BERT and RoBERTa checkpoints -> our post-norm encoder (BertModel key layout)."""

from __future__ import annotations

import re

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig


def bert_layout(hf: dict, name: str, default_act: str = "gelu") -> dict:
    """The ModelConfig settings every BERT-layout encoder (BERT, RoBERTa, ELECTRA, ALBERT) reads the same way
    from its HF config; `name` words the refusal of relative position embeddings."""
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{name}position_embedding_type {hf['position_embedding_type']!r} is not supported")
    return dict(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"], d_ff=hf["intermediate_size"], norm_eps=hf.get("layer_norm_eps", 1e-12),
        activation=activation(hf.get("hidden_act", default_act)), max_positions=hf["max_position_embeddings"],
        type_vocab_size=hf.get("type_vocab_size", 2), pad_token_id=hf.get("pad_token_id"), embedding_norm=True,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def bert_config(hf: dict) -> ModelConfig:
    roberta = hf["model_type"] in ("roberta", "xlm-roberta")
    layout = bert_layout(hf, "")
    return ModelConfig(
        family="roberta" if roberta else "bert",
        **layout,
        # HF's create_position_ids_from_input_ids: positions start at padding_idx + 1.
        position_offset=hf["pad_token_id"] + 1 if roberta else 0,
        # RoBERTa's lm_head applies gelu whatever hidden_act says; BERT's transform uses hidden_act.
        mlm_head=(("gelu" if roberta else layout["activation"]) if has_mlm_head(hf) else None),
    )


# Architectures whose checkpoints carry a masked-LM head (BertForPreTraining adds next-sentence
# prediction, which the app does not use). The head is kept when the config names one of them: the
# config, not the tensors, decides, because the module is built (and its size estimated) before any
# weight is read.
MLM_ARCHITECTURES = ("BertForMaskedLM", "BertForPreTraining", "RobertaForMaskedLM", "XLMRobertaForMaskedLM")


def has_mlm_head(hf: dict) -> bool:
    return any(a in MLM_ARCHITECTURES for a in hf.get("architectures") or ())


def convert_bert(hf: dict, checkpoint: dict, model) -> dict:
    # Old checkpoints name LayerNorm parameters gamma/beta; HF renames them the same way on load.
    checkpoint = {_modern_norm_name(k): v for k, v in checkpoint.items()}
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "bert.", "roberta."))
    w = WeightLedger(checkpoint, prefix)
    w.move("embeddings.word_embeddings.weight", "token_embedding.weight")
    w.move("embeddings.position_embeddings.weight", "position_embedding.weight")
    w.move("embeddings.token_type_embeddings.weight", "type_embedding.weight")
    for p in ("weight", "bias"):
        w.move(f"embeddings.LayerNorm.{p}", f"embedding_norm.{p}")
    move_bert_layers(w, model.config.n_layers)
    if model.mlm_head is not None:
        roberta = model.config.family == "roberta"
        if ("lm_head.dense" if roberta else "cls.predictions.transform.dense") + ".weight" in checkpoint:
            _move_mlm_head(w, checkpoint, model.config.tie_word_embeddings, roberta)
        else:
            # The config names a masked-LM architecture but the checkpoint has no head (re-saved base
            # weights): load the encoder as before, without mask filling, rather than refuse the model.
            model.mlm_head = None
    # Task heads and buffers the attention view does not use.
    w.ignore(r"(bert\.|roberta\.)?(pooler\..*|embeddings\.(position_ids|token_type_ids))")
    w.ignore(r"(cls|lm_head|classifier|qa_outputs)\..*")
    return w.finish(model)


def move_bert_layers(w: WeightLedger, n_layers: int) -> None:
    """BertLayer's names (ELECTRA's too) -> our post-norm blocks."""
    for i in range(n_layers):
        hf_layer, ours = f"encoder.layer.{i}.", f"blocks.{i}."
        for p in ("weight", "bias"):
            w.move(f"{hf_layer}attention.self.query.{p}", f"{ours}attn.q_proj.{p}")
            w.move(f"{hf_layer}attention.self.key.{p}", f"{ours}attn.k_proj.{p}")
            w.move(f"{hf_layer}attention.self.value.{p}", f"{ours}attn.v_proj.{p}")
            w.move(f"{hf_layer}attention.output.dense.{p}", f"{ours}attn.o_proj.{p}")
            w.move(f"{hf_layer}attention.output.LayerNorm.{p}", f"{ours}attn_norm.{p}")
            w.move(f"{hf_layer}intermediate.dense.{p}", f"{ours}mlp.up_proj.{p}")
            w.move(f"{hf_layer}output.dense.{p}", f"{ours}mlp.down_proj.{p}")
            w.move(f"{hf_layer}output.LayerNorm.{p}", f"{ours}mlp_norm.{p}")


def _move_mlm_head(w: WeightLedger, checkpoint: dict, tied: bool, roberta: bool) -> None:
    """BERT's cls.predictions.* or RoBERTa's lm_head.* (outside the base model's prefix) -> mlm_head.*.
    The decoder weight is the token embedding when tied (a saved copy, if any, is dropped); the bias is
    stored twice by some checkpoints (`predictions.bias` and `decoder.bias`, tied): the first is taken."""
    head = "lm_head." if roberta else "cls.predictions."
    names = {"dense": "dense", "norm": "layer_norm"} if roberta else {
        "dense": "transform.dense", "norm": "transform.LayerNorm"}
    base, w.prefix = w.prefix, ""  # the head lives outside the base model's prefix
    for ours, theirs in names.items():
        for p in ("weight", "bias"):
            w.move(f"{head}{theirs}.{p}", f"mlm_head.{ours}.{p}")
    bias = next((k for k in (head + "bias", head + "decoder.bias") if k in checkpoint), head + "bias")
    w.move(bias, "mlm_head.decoder.bias")  # a missing bias is the ledger's error, naming the key
    w.ignore(re.escape(head + "decoder.bias"))
    if tied:
        w.put("mlm_head.decoder.weight", w.converted["token_embedding.weight"])
        w.ignore(re.escape(head + "decoder.weight"))
    else:
        w.move(head + "decoder.weight", "mlm_head.decoder.weight")
    w.prefix = base


def _modern_norm_name(key: str) -> str:
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key
