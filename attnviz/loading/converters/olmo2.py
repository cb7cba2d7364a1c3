"""OLMo 2 checkpoints -> a decoder whose norms sit after each sublayer, x + norm(f(x)) ("after"
placement, no norm before attention or MLP, a final norm), with one RMSNorm over the whole query and
key projections (all heads together, before the split into heads and rotary)."""

from __future__ import annotations

import dataclasses

from attnviz.loading.converters.llama import llama_config
from attnviz.loading.converters.llama_like import convert_decoder
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig

AFTER_NORMS = (("post_attention_layernorm", "attn_post_norm"), ("post_feedforward_layernorm", "mlp_post_norm"))


def olmo2_config(hf: dict) -> ModelConfig:
    if hf.get("clip_qkv") is not None:
        raise ValueError("OLMo 2 with clip_qkv is not supported")
    return dataclasses.replace(
        llama_config(hf), family="olmo2", qk_norm="projection", norm_placement="after", final_norm=True,
        norm_eps=hf.get("rms_norm_eps", 1e-5))


def convert_olmo2(hf: dict, checkpoint: dict, model) -> dict:
    return convert_decoder(WeightLedger(checkpoint, "model."), model, AFTER_NORMS)
