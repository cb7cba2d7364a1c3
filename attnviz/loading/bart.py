"""BART checkpoints (BartForConditionalGeneration / BartModel's key layout) -> our encoder-decoder
(attnviz.transformer.seq2seq): Marian's post-norm layers and attention names, plus learned positions whose
table starts at row 2 (HF's BartLearnedPositionalEmbedding offset: position p reads row p + 2), a LayerNorm
on each stack's embeddings (`layernorm_embedding`), one shared token embedding and final_logits_bias."""

from __future__ import annotations

import torch

from attnviz.loading.activations import activation
from attnviz.loading.ledger import WeightLedger
from attnviz.loading.marian import _attention, _block_rest
from attnviz.transformer.seq2seq import Seq2SeqConfig

BART_POSITION_OFFSET = 2


def bart_config(hf: dict) -> Seq2SeqConfig:
    pairs = [("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")]
    differ = {a: (hf.get(a), hf.get(b)) for a, b in pairs if hf.get(a) != hf.get(b)}
    if differ:
        raise ValueError(f"encoder and decoder of different widths are not supported: {differ}")
    if hf.get("normalize_before") or hf.get("add_final_layer_norm"):
        raise ValueError("pre-norm BART variants (mBART-style normalize_before / add_final_layer_norm) are not "
                         "supported")
    eos = hf.get("eos_token_id", 2)
    return Seq2SeqConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"],
        encoder_layers=hf["encoder_layers"],
        decoder_layers=hf["decoder_layers"],
        d_ff=hf["encoder_ffn_dim"],
        activation=activation(hf.get("activation_function", "gelu")),
        max_positions=hf["max_position_embeddings"],
        positions="learned",
        position_offset=BART_POSITION_OFFSET,
        embedding_norm=True,
        scale_embedding=bool(hf.get("scale_embedding", False)),
        share_embeddings=True,
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
        pad_token_id=hf.get("pad_token_id", 1),
        eos_token_id=eos[0] if isinstance(eos, list) else eos,
        decoder_start_token_id=hf.get("decoder_start_token_id", 2),
        bad_token_ids=tuple(ids[0] for ids in (hf.get("bad_words_ids") or []) if len(ids) == 1),
        forced_eos=hf.get("forced_eos_token_id") is not None,
        forced_bos_token_id=hf.get("forced_bos_token_id"),
    )


def convert_bart(hf: dict, checkpoint: dict, model) -> dict:
    c = model.config
    prefix = "model." if any(k.startswith("model.") for k in checkpoint) else ""  # BartModel saves no prefix
    w = WeightLedger(checkpoint)
    key = next(k for k in (f"{prefix}shared.weight", f"{prefix}encoder.embed_tokens.weight") if k in checkpoint)
    embedding = w.take(key)
    w.ignore(rf"{prefix}(shared|encoder\.embed_tokens|decoder\.embed_tokens)\.weight")
    w.put("encoder_embedding.weight", embedding)
    w.put("decoder_embedding.weight", embedding)
    head = checkpoint.get("lm_head.weight")
    w.ignore(r"lm_head\.weight")
    if c.tie_word_embeddings:
        w.put("lm_head.weight", embedding)
    else:
        w.put("lm_head.weight", embedding if head is None else head)
    bias = checkpoint.get("final_logits_bias")
    w.ignore(r"final_logits_bias")
    w.put("final_logits_bias", torch.zeros(c.target_vocab_size) if bias is None else bias.reshape(-1))
    for side, n in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
        w.move(f"{prefix}{side}.embed_positions.weight", f"{side}_positions.weight")
        for p in ("weight", "bias"):
            w.move(f"{prefix}{side}.layernorm_embedding.{p}", f"{side}_embedding_norm.{p}")
        for i in range(n):
            hf_layer, ours = f"{prefix}{side}.layers.{i}.", f"{side}_blocks.{i}."
            _attention(w, f"{hf_layer}self_attn.", f"{ours}self_attn.")
            if side == "decoder":
                _attention(w, f"{hf_layer}encoder_attn.", f"{ours}cross_attn.")
                for p in ("weight", "bias"):
                    w.move(f"{hf_layer}encoder_attn_layer_norm.{p}", f"{ours}cross_attn_norm.{p}")
            _block_rest(w, hf_layer, ours)
    return w.finish(model)
