"""Where the patching tests hook Hugging Face's own modules (tests/interventions): each decoder layer, its
attention's output projection (whose input is the heads' outputs side by side) and its MLP; and how a forward
pre-hook reads and replaces a layer's first input, given positionally or as `hidden_states`."""

from __future__ import annotations


def hf_layers(hf):
    """(decoder layer, output projection, MLP) of each layer."""
    if hasattr(hf, "transformer"):  # GPT-2
        return [(block, block.attn.c_proj, block.mlp) for block in hf.transformer.h]
    return [(layer, layer.self_attn.o_proj, layer.mlp) for layer in hf.model.layers]


def first_input(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


def with_first_input(args, kwargs, x):
    return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
