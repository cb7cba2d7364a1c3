"""What the BERT-layout encoders share (BERT, RoBERTa, ELECTRA, ALBERT, DistilBERT, DeBERTa): the config
settings they read alike, the embeddings, BertLayer's names, and the masked-LM head's moves."""

from __future__ import annotations

import re

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger

BERT_LAYER = {"attention.self.query": "attn.q_proj", "attention.self.key": "attn.k_proj",
              "attention.self.value": "attn.v_proj", "attention.output.dense": "attn.o_proj",
              "attention.output.LayerNorm": "attn_norm", "intermediate.dense": "mlp.up_proj",
              "output.dense": "mlp.down_proj", "output.LayerNorm": "mlp_norm"}


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


def has_architecture(hf: dict, architectures: tuple[str, ...]) -> bool:
    """Whether the config names one of `architectures` (a masked-LM one keeps its head: the config, not the
    tensors, decides, because the module is built and its size estimated before any weight is read)."""
    return any(a in architectures for a in hf.get("architectures") or ())


def modern_norm_names(checkpoint: dict) -> dict:
    """Old checkpoints name LayerNorm parameters gamma/beta; HF renames them the same way on load."""
    return {_modern_norm_name(k): v for k, v in checkpoint.items()}


def _modern_norm_name(key: str) -> str:
    if key.endswith(".gamma"):
        return key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        return key[: -len("beta")] + "bias"
    return key


def move_embeddings(w: WeightLedger, positions: bool = True, types: bool = True) -> None:
    """embeddings.{word,position,token_type}_embeddings and embeddings.LayerNorm -> ours."""
    w.move("embeddings.word_embeddings.weight", "token_embedding.weight")
    if positions:
        w.move("embeddings.position_embeddings.weight", "position_embedding.weight")
    if types:
        w.move("embeddings.token_type_embeddings.weight", "type_embedding.weight")
    w.move_params({"embeddings.LayerNorm": "embedding_norm"})


def move_bert_layers(w: WeightLedger, n_layers: int) -> None:
    """BertLayer's names (ELECTRA's too) -> our post-norm blocks."""
    for i in range(n_layers):
        w.move_params(BERT_LAYER, f"encoder.layer.{i}.", f"blocks.{i}.")


def move_mlm_head(w: WeightLedger, model, dense: str, norm: str, biases: tuple[str, ...], decoder: str,
                  tied: bool | None = None) -> None:
    """A masked-LM head (outside the base model's prefix) -> mlm_head.*: `dense` and `norm` (weight and bias),
    the decoder's bias (the first of `biases` the checkpoint holds; the others are tied copies, dropped) and
    its weight (`decoder`; the token embedding when tied, a saved copy dropped). tied: the config's
    tie_word_embeddings unless given. A config naming a masked-LM architecture over base weights, with no
    head saved, loads the encoder without mask filling (model.mlm_head = None) rather than be refused."""
    if model.mlm_head is None:
        return
    base, w.prefix = w.prefix, ""
    if not w.has(f"{dense}.weight"):
        model.mlm_head = None
    else:
        for theirs, ours in ((dense, "dense"), (norm, "norm")):
            for p in ("weight", "bias"):
                w.move(f"{theirs}.{p}", f"mlm_head.{ours}.{p}")
        bias = next((k for k in biases if w.has(k)), biases[0])  # none at all: the ledger's error names it
        w.move(bias, "mlm_head.decoder.bias")
        for other in biases:
            w.ignore(re.escape(other))
        if model.config.tie_word_embeddings if tied is None else tied:
            w.put("mlm_head.decoder.weight", w.converted["token_embedding.weight"])
            w.ignore(re.escape(decoder))
        else:
            w.move(decoder, "mlm_head.decoder.weight")
    w.prefix = base
