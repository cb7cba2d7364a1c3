"""SmolLM3 checkpoints -> Llama's decoder with NoPE layers: layers that skip rotary altogether.

HF's `no_rope_layers` is a list of flags per layer that reads backwards from its name: 1 means the layer
USES rotary, 0 means NoPE. Without the list, every `no_rope_layer_interval`-th layer (the 4th, 8th, ...)
is NoPE. Sliding layers follow HF's layer_types (by default only NoPE layers slide, when enabled).
"""

from __future__ import annotations

import dataclasses

from attnviz.loading.converters.llama import llama_config
from attnviz.loading.converters.llama_like import convert_llama_like, layer_windows
from attnviz.transformer.config import ModelConfig


def smollm3_config(hf: dict) -> ModelConfig:
    n_layers = hf["num_hidden_layers"]
    uses_rope = hf.get("no_rope_layers")
    if uses_rope is None:
        interval = hf.get("no_rope_layer_interval", 4)
        uses_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if len(uses_rope) != n_layers:
        raise ValueError(f"smollm3 no_rope_layers has {len(uses_rope)} entries for {n_layers} layers")
    layer_types = hf.get("layer_types")
    if layer_types is None and hf.get("use_sliding_window") and hf.get("sliding_window"):
        layer_types = ["full_attention" if rope else "sliding_attention" for rope in uses_rope]
    return dataclasses.replace(
        llama_config(hf), family="smollm3", nope_layers=tuple(i for i, rope in enumerate(uses_rope) if not rope),
        layer_windows=layer_windows(hf, layer_types))


convert_smollm3 = convert_llama_like  # Llama's tensors
