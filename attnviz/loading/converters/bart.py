"""BART checkpoints (BartForConditionalGeneration / BartModel's key layout) -> our encoder-decoder
(attnviz.transformer.seq2seq): Marian's post-norm layers and attention names, plus learned positions whose
table starts at row 2 (HF's BartLearnedPositionalEmbedding offset: position p reads row p + 2), a LayerNorm
on each stack's embeddings (`layernorm_embedding`), one shared token embedding and final_logits_bias."""

from __future__ import annotations

import torch

from attnviz.loading.converters.marian import check_equal_widths, move_attention, move_block_rest, shared_settings
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.seq2seq import Seq2SeqConfig

BART_POSITION_OFFSET = 2


def bart_config(hf: dict) -> Seq2SeqConfig:
    check_equal_widths(hf)
    if hf.get("normalize_before") or hf.get("add_final_layer_norm"):
        raise ValueError("pre-norm BART variants (mBART-style normalize_before / add_final_layer_norm) are not "
                         "supported")
    return Seq2SeqConfig(
        **shared_settings(hf, default_activation="gelu", default_eos=2),
        positions="learned",
        position_offset=BART_POSITION_OFFSET,
        embedding_norm=True,
        share_embeddings=True,
        pad_token_id=hf.get("pad_token_id", 1),
        decoder_start_token_id=hf.get("decoder_start_token_id", 2),
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
        w.move_params({f"{prefix}{side}.layernorm_embedding": f"{side}_embedding_norm"})
        for i in range(n):
            hf_layer, ours = f"{prefix}{side}.layers.{i}.", f"{side}_blocks.{i}."
            move_attention(w, f"{hf_layer}self_attn.", f"{ours}self_attn.")
            if side == "decoder":
                move_attention(w, f"{hf_layer}encoder_attn.", f"{ours}cross_attn.")
                w.move_params({"encoder_attn_layer_norm": "cross_attn_norm"}, hf_layer, ours)
            move_block_rest(w, hf_layer, ours)
    return w.finish(model)
