"""HF activation names -> ours (attnviz.transformer.layers.ACTIVATIONS), shared by the converters."""

from __future__ import annotations

HF_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "silu": "silu", "swish": "silu"}


def activation(name: str) -> str:
    if name not in HF_ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported; supported: {sorted(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[name]
