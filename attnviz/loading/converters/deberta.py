"""DeBERTa (v1) and DeBERTa-v2/v3 checkpoints -> our post-norm encoder with disentangled attention
(transformer/deberta.py).

v1 (microsoft/deberta-base, -large) stores q, k and v fused per head in one bias-free `in_proj` (rows of head h:
its q, then k, then v) with separate `q_bias` and `v_bias`, a bias-free `pos_proj` (c2p) and `pos_q_proj`
(p2c); its table of 2 * max_relative_positions rows is read at clamp(i - j + max_relative, 0, 2 max_relative - 1),
which is HF's slice of the table around its middle followed by its clamp, and v2's rule without buckets.

v3 (microsoft/deberta-v3-*) has no absolute positions (position_biased_input False), 256 log buckets over
512 relative positions, keys shared between content and position (share_att_key) and a LayerNorm'd relative
table (norm_rel_ebd "layer_norm"). The scale is 1 / sqrt(D * (1 + number of position terms)): 1/sqrt(3D)
with c2p and p2c. Refused: the convolution after layer 0 (conv_kernel_size, deberta-v2-xlarge/xxlarge) and
an embedding_size other than hidden_size (projected after the position sum, unlike ALBERT).
"""

from __future__ import annotations

import math
import re

import torch

from attnviz.loading.converters.activations import activation
from attnviz.loading.converters.bert import BERT_HEAD
from attnviz.loading.converters.bert_like import BERT_LAYER, has_architecture, move_embeddings, move_mlm_head
from attnviz.loading.ledger import WeightLedger, detect_prefix
from attnviz.transformer.config import ModelConfig

MLM_ARCHITECTURES = ("DebertaV2ForMaskedLM", "DebertaForMaskedLM")


def _terms(hf: dict) -> tuple[str, ...]:
    raw = hf.get("pos_att_type") or ()
    raw = raw.lower().split("|") if isinstance(raw, str) else raw
    terms = tuple(t.strip() for t in raw if t.strip())
    unknown = sorted(set(terms) - {"c2p", "p2c"})
    if unknown:
        raise ValueError(f"DeBERTa pos_att_type {unknown} is not supported (c2p, p2c)")
    return terms


def deberta_v2_config(hf: dict) -> ModelConfig:
    if hf.get("talking_head"):
        raise ValueError("DeBERTa with talking_head=True is not supported")
    if hf.get("conv_kernel_size", 0) > 0:
        raise ValueError("DeBERTa-v2 with conv_kernel_size > 0 (a convolution after layer 0) is not supported")
    if hf.get("embedding_size", hf["hidden_size"]) != hf["hidden_size"]:
        raise ValueError("DeBERTa-v2 with embedding_size != hidden_size is not supported")
    terms = _terms(hf)
    relative = bool(hf.get("relative_attention", False))
    absolute = bool(hf.get("position_biased_input", True))
    if not relative and not absolute:
        raise ValueError("DeBERTa-v2 without relative attention and without absolute positions has no positions")
    n_heads = hf["num_attention_heads"]
    head_dim = hf.get("attention_head_size") or hf["hidden_size"] // n_heads
    max_relative = hf.get("max_relative_positions", -1)
    max_relative = max_relative if max_relative >= 1 else hf["max_position_embeddings"]
    buckets = hf.get("position_buckets", -1)
    norm_rel = [x.strip() for x in (hf.get("norm_rel_ebd") or "none").lower().split("|")]
    return ModelConfig(
        family=hf["model_type"],  # "deberta" (v1) or "deberta-v2"
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        head_dim=hf.get("attention_head_size"),
        d_ff=hf["intermediate_size"],
        norm_eps=hf.get("layer_norm_eps", 1e-7),
        activation=activation(hf.get("hidden_act", "gelu")),
        max_positions=hf["max_position_embeddings"] if absolute else None,
        type_vocab_size=hf.get("type_vocab_size") or None,
        pad_token_id=hf.get("pad_token_id"),
        embedding_norm=True,
        # Without relative attention HF still divides by sqrt(D * (1 + len(pos_att_type))).
        attn_scale=1.0 / math.sqrt(head_dim * (1 + len(terms))) if terms else None,
        pos_att_type=terms if relative else (),
        relative_span=(buckets if buckets > 0 else max_relative) if relative else 0,
        position_buckets=max(buckets, 0),
        max_relative_positions=max_relative,
        share_att_key=bool(hf.get("share_att_key", False)),
        norm_rel_ebd="layer_norm" in norm_rel,
        mlm_head=activation(hf.get("hidden_act", "gelu")) if has_architecture(hf, MLM_ARCHITECTURES) else None,
        tie_word_embeddings=hf.get("tie_word_embeddings", True),
    )


def convert_deberta_v2(hf: dict, checkpoint: dict, model) -> dict:
    prefix = detect_prefix(checkpoint, "embeddings.word_embeddings.weight", ("", "deberta."))
    w = WeightLedger(checkpoint, prefix)
    c = model.config
    move_embeddings(w, positions=c.max_positions is not None, types=bool(c.type_vocab_size))
    names = {"attention.self.query_proj": "attn.q_proj", "attention.self.key_proj": "attn.k_proj",
             "attention.self.value_proj": "attn.v_proj",
             **{k: v for k, v in BERT_LAYER.items() if not k.startswith("attention.self.")}}
    if c.pos_att_type and not c.share_att_key:
        if "c2p" in c.pos_att_type:
            names["attention.self.pos_key_proj"] = "attn.pos_key_proj"
        if "p2c" in c.pos_att_type:
            names["attention.self.pos_query_proj"] = "attn.pos_query_proj"
    if c.family == "deberta":
        _move_v1_attention(w, c)
        names = {k: v for k, v in names.items() if not k.startswith("attention.self.")}
    for i in range(c.n_layers):
        w.move_params(names, f"encoder.layer.{i}.", f"blocks.{i}.")
    if c.pos_att_type:
        w.move("encoder.rel_embeddings.weight", "relative.embedding.weight")
        if c.norm_rel_ebd:
            w.move_params({"encoder.LayerNorm": "relative.norm"})
    _mlm_head(w, checkpoint, model)
    w.ignore(r"(deberta\.)?embeddings\.position_ids")
    if c.max_positions is None:  # saved by some checkpoints without being used (HF ignores them on load too)
        w.ignore(r"(deberta\.)?embeddings\.position_embeddings\.weight")
    w.ignore(r"(cls|lm_predictions|mask_predictions|pooler|classifier|qa_outputs)\..*")
    return w.finish(model)


def _move_v1_attention(w: WeightLedger, c: ModelConfig) -> None:
    """v1's fused per-head in_proj [H * 3D, C] and q/v biases; its position projections (pos_proj without
    a bias: a zero one here)."""
    d = c.dim_per_head
    for i in range(c.n_layers):
        theirs, ours = f"encoder.layer.{i}.attention.self.", f"blocks.{i}.attn."
        fused = w.take(theirs + "in_proj.weight").view(c.n_heads, 3, d, c.d_model)  # H, (q, k, v), D, C
        for k, name in enumerate(("q_proj", "k_proj", "v_proj")):
            w.put(f"{ours}{name}.weight", fused[:, k].reshape(c.n_heads * d, c.d_model))
        w.move(theirs + "q_bias", ours + "q_proj.bias")
        w.put(ours + "k_proj.bias", torch.zeros(c.n_heads * d, dtype=fused.dtype))
        w.move(theirs + "v_bias", ours + "v_proj.bias")
        if "c2p" in c.pos_att_type:
            w.move(theirs + "pos_proj.weight", ours + "pos_key_proj.weight")
            w.put(ours + "pos_key_proj.bias", torch.zeros(c.n_heads * d, dtype=fused.dtype))
        if "p2c" in c.pos_att_type:
            w.move_params({"pos_q_proj": "pos_query_proj"}, theirs, ours)


def _mlm_head(w: WeightLedger, checkpoint: dict, model) -> None:
    """The legacy head (cls.predictions.*, BERT's layout) or the current one (lm_predictions.lm_head.*:
    dense, LayerNorm, a bias, and always the token embedding as decoder)."""
    if "cls.predictions.transform.dense.weight" in checkpoint:
        move_mlm_head(w, model, **BERT_HEAD)
        return
    head = "lm_predictions.lm_head."
    move_mlm_head(w, model, dense=head + "dense", norm=head + "LayerNorm", biases=(head + "bias",),
                  decoder=head + "decoder.weight", tied=True)
    w.ignore(re.escape(head) + ".*")
