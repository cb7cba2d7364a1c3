"""Marian (Helsinki-NLP opus-mt) checkpoints -> our encoder-decoder (attnviz.transformer.seq2seq), MarianMTModel's
key layout. The sinusoidal position tables some checkpoints carry are fixed functions of the shape and
are recomputed (HF recomputes them too: `_keys_to_ignore_on_load_missing`)."""

from __future__ import annotations

import torch

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.seq2seq import Seq2SeqConfig


def check_equal_widths(hf: dict) -> None:
    """Marian's and BART's configs name the encoder's and the decoder's widths apart; ours has one of each."""
    pairs = [("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")]
    differ = {a: (hf.get(a), hf.get(b)) for a, b in pairs if hf.get(a) != hf.get(b)}
    if differ:
        raise ValueError(f"encoder and decoder of different widths are not supported: {differ}")


def shared_settings(hf: dict, default_activation: str, default_eos: int) -> dict:
    """The Seq2SeqConfig settings Marian's and BART's configs (one schema, BART's) give alike."""
    eos = hf.get("eos_token_id", default_eos)
    return dict(
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"],
        encoder_layers=hf["encoder_layers"],
        decoder_layers=hf["decoder_layers"],
        d_ff=hf["encoder_ffn_dim"],
        activation=activation(hf.get("activation_function", default_activation)),
        max_positions=hf["max_position_embeddings"],
        scale_embedding=bool(hf.get("scale_embedding", False)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
        eos_token_id=eos[0] if isinstance(eos, list) else eos,
        bad_token_ids=tuple(ids[0] for ids in (hf.get("bad_words_ids") or []) if len(ids) == 1),
    )


def marian_config(hf: dict) -> Seq2SeqConfig:
    check_equal_widths(hf)
    if hf.get("normalize_before") or hf.get("add_final_layer_norm") or hf.get("normalize_embedding"):
        raise ValueError("pre-norm / embedding-norm Marian variants (mBART-style) are not supported")
    shared = bool(hf.get("share_encoder_decoder_embeddings", True))
    settings = shared_settings(hf, default_activation="swish", default_eos=0)
    return Seq2SeqConfig(
        **settings,
        decoder_vocab_size=None if shared else hf.get("decoder_vocab_size") or hf["vocab_size"],
        share_embeddings=shared,
        pad_token_id=hf["pad_token_id"],
        decoder_start_token_id=hf.get("decoder_start_token_id", hf["pad_token_id"]),
        forced_eos=hf.get("forced_eos_token_id", hf.get("eos_token_id", 0)) is not None,
    )


def convert_marian(hf: dict, checkpoint: dict, model) -> dict:
    c = model.config
    w = WeightLedger(checkpoint)
    if c.share_embeddings:
        # Saved once as model.shared (newer files) or as the encoder's copy (older ones); the other names
        # are tied aliases of the same matrix.
        key = "model.shared.weight" if "model.shared.weight" in checkpoint else "model.encoder.embed_tokens.weight"
        embedding = w.take(key)
        w.ignore(r"model\.(shared|encoder\.embed_tokens|decoder\.embed_tokens)\.weight")
        w.put("encoder_embedding.weight", embedding)
        w.put("decoder_embedding.weight", embedding)
    else:
        w.move("model.encoder.embed_tokens.weight", "encoder_embedding.weight")
        w.move("model.decoder.embed_tokens.weight", "decoder_embedding.weight")
        w.ignore(r"model\.shared\.weight")
    if c.tie_word_embeddings:
        w.put("lm_head.weight", w.converted["decoder_embedding.weight"])
        w.ignore(r"lm_head\.weight")
    else:
        w.move("lm_head.weight", "lm_head.weight")
    # [1, V] in HF; absent from some checkpoints, where HF keeps its zero initialisation.
    bias = checkpoint.get("final_logits_bias")
    w.ignore(r"final_logits_bias")
    w.put("final_logits_bias", torch.zeros(c.target_vocab_size) if bias is None else bias.reshape(-1))
    w.ignore(r"model\.(encoder|decoder)\.embed_positions\.weight")
    for i in range(c.encoder_layers):
        move_attention(w, f"model.encoder.layers.{i}.self_attn.", f"encoder_blocks.{i}.self_attn.")
        move_block_rest(w, f"model.encoder.layers.{i}.", f"encoder_blocks.{i}.")
    for i in range(c.decoder_layers):
        theirs, ours = f"model.decoder.layers.{i}.", f"decoder_blocks.{i}."
        move_attention(w, f"{theirs}self_attn.", f"{ours}self_attn.")
        move_attention(w, f"{theirs}encoder_attn.", f"{ours}cross_attn.")
        w.move_params({"encoder_attn_layer_norm": "cross_attn_norm"}, theirs, ours)
        move_block_rest(w, theirs, ours)
    return w.finish(model)


ATTENTION = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "out_proj": "o_proj"}
BLOCK_REST = {"self_attn_layer_norm": "self_attn_norm", "fc1": "mlp.up_proj", "fc2": "mlp.down_proj",
              "final_layer_norm": "mlp_norm"}  # BART's names too


def move_attention(w: WeightLedger, hf: str, ours: str) -> None:
    w.move_params(ATTENTION, hf, ours)


def move_block_rest(w: WeightLedger, hf: str, ours: str) -> None:
    w.move_params(BLOCK_REST, hf, ours)
