"""T5, T5 v1.1 and Flan-T5 checkpoints (T5ForConditionalGeneration's key layout) -> our encoder-decoder
(attnviz.transformer.seq2seq) with relative position buckets, unscaled scores, T5's RMSNorm before each
sublayer and a final norm per stack, no linear biases.

The head: T5 1.0 ties it to the shared embedding and reads the decoder's output times d_model^-0.5; v1.1
and Flan ship their own `lm_head.weight` and do not rescale. transformers 5 records the rescale as
`scale_decoder_outputs` (True unless the saved config said tie_word_embeddings=False) and reports every T5
as tied; a checkpoint whose lm_head differs from the shared embedding is loaded untied by HF, and by us.
"""

from __future__ import annotations

import torch

from attnviz.loading.converters.activations import activation
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.seq2seq import Seq2SeqConfig

T5_MAX_POSITIONS = 512  # relative positions have no table; the bound our runs keep (T5's n_positions)


def t5_config(hf: dict) -> Seq2SeqConfig:
    projection = hf.get("feed_forward_proj", "relu")
    parts = projection.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
        raise ValueError(f"feed_forward_proj {projection!r} is not supported (expected 'relu' or 'gated-gelu')")
    act = "gelu_new" if projection == "gated-gelu" else parts[-1]  # HF's backwards-compatible rule
    rescale = hf.get("scale_decoder_outputs", hf.get("tie_word_embeddings", True) is not False)
    eos = hf.get("eos_token_id", 1)
    pad = hf.get("pad_token_id", 0)
    return Seq2SeqConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        d_kv=hf.get("d_kv", hf["d_model"] // hf["num_heads"]),
        n_heads=hf["num_heads"],
        encoder_layers=hf["num_layers"],
        decoder_layers=hf.get("num_decoder_layers") or hf["num_layers"],
        d_ff=hf["d_ff"],
        activation=activation(act),
        gated_mlp=len(parts) == 2,
        max_positions=int(hf.get("n_positions") or T5_MAX_POSITIONS),
        norm_eps=hf.get("layer_norm_epsilon", 1e-6),
        norm="rmsnorm",
        norm_placement="pre",
        positions="relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        attn_scale=1.0,
        bias=False,
        scale_embedding=False,
        share_embeddings=True,
        tie_word_embeddings=bool(rescale),
        logits_scale=hf["d_model"] ** -0.5 if rescale else 1.0,
        pad_token_id=pad,
        eos_token_id=eos[0] if isinstance(eos, list) else eos,
        decoder_start_token_id=hf.get("decoder_start_token_id", pad),
        bad_token_ids=tuple(ids[0] for ids in (hf.get("bad_words_ids") or []) if len(ids) == 1),
        forced_eos=hf.get("forced_eos_token_id") is not None,
    )


def convert_t5(hf: dict, checkpoint: dict, model) -> dict:
    c = model.config
    w = WeightLedger(checkpoint)
    key = "shared.weight" if "shared.weight" in checkpoint else "encoder.embed_tokens.weight"
    embedding = w.take(key)
    head = checkpoint.get("lm_head.weight")
    w.ignore(r"(shared|encoder\.embed_tokens|decoder\.embed_tokens|lm_head)\.weight")
    w.put("encoder_embedding.weight", embedding)
    w.put("decoder_embedding.weight", embedding)
    if c.tie_word_embeddings:
        if head is not None and not torch.equal(head, embedding):
            raise ValueError("this T5 checkpoint rescales a tied head (T5 1.0) but ships an lm_head that differs "
                             "from its shared embedding")
        w.put("lm_head.weight", embedding)
    else:  # v1.1 / Flan: their own head; a save_pretrained of a tied HF model leaves it out
        w.put("lm_head.weight", embedding if head is None else head)
    w.put("final_logits_bias", torch.zeros(c.target_vocab_size))
    for side, n in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
        w.move(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
               f"{side}_relative.embedding.weight")
        w.move(f"{side}.final_layer_norm.weight", f"{side}_norm.weight")
        for i in range(n):
            hf_block, ours = f"{side}.block.{i}.layer.", f"{side}_blocks.{i}."
            _attention(w, f"{hf_block}0.SelfAttention.", f"{ours}self_attn.")
            w.move(f"{hf_block}0.layer_norm.weight", f"{ours}self_attn_norm.weight")
            mlp = 1
            if side == "decoder":
                _attention(w, f"{hf_block}1.EncDecAttention.", f"{ours}cross_attn.")
                w.move(f"{hf_block}1.layer_norm.weight", f"{ours}cross_attn_norm.weight")
                mlp = 2
            dense = f"{hf_block}{mlp}.DenseReluDense."
            if c.gated_mlp:
                w.move(f"{dense}wi_0.weight", f"{ours}mlp.gate_proj.weight")
                w.move(f"{dense}wi_1.weight", f"{ours}mlp.up_proj.weight")
            else:
                w.move(f"{dense}wi.weight", f"{ours}mlp.up_proj.weight")
            w.move(f"{dense}wo.weight", f"{ours}mlp.down_proj.weight")
            w.move(f"{hf_block}{mlp}.layer_norm.weight", f"{ours}mlp_norm.weight")
    return w.finish(model)


def _attention(w: WeightLedger, hf: str, ours: str) -> None:
    for theirs, mine in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
        w.move(f"{hf}{theirs}.weight", f"{ours}{mine}.weight")
