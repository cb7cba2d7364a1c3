"""Qwen3 checkpoints -> Llama's decoder plus an RMSNorm over each head's queries and keys (before
rotary). Sliding layers, where a config turns them on, are the layers from max_window_layers on (HF's
layer_types rule)."""

from __future__ import annotations

import dataclasses

from attnviz.loading.converters.llama import llama_config
from attnviz.loading.converters.llama_like import convert_llama_like, layer_windows
from attnviz.transformer.config import ModelConfig


def qwen3_config(hf: dict) -> ModelConfig:
    layer_types = hf.get("layer_types")
    window = hf.get("sliding_window") if hf.get("use_sliding_window") else None
    if layer_types is None and window:  # a raw config.json: Qwen3Config's own rule
        first = hf.get("max_window_layers", 28)
        layer_types = ["sliding_attention" if i >= first else "full_attention" for i in range(hf["num_hidden_layers"])]
    return dataclasses.replace(
        llama_config(hf), family="qwen3", qk_norm="head", layer_windows=layer_windows(hf, layer_types))


convert_qwen3 = convert_llama_like  # Llama's tensors, q/k norms included
