"""Mixtral checkpoints -> Llama-style attention (GQA, rotary, optional sliding window) with a sparse
mixture-of-experts MLP: softmax over all experts, the top k kept and renormalised (HF MixtralTopKRouter).

Two storage layouts reach us. transformers 5 holds the experts as 3-D tensors, `mlp.experts.gate_up_proj`
[E, 2F, C] (gate rows, then up rows) and `mlp.experts.down_proj` [E, C, F], with the router at `mlp.gate`;
that is our layout. Hub checkpoints (and transformers 5's own save_pretrained, which converts back) keep
Mixtral's original names, `block_sparse_moe.gate` and one module per expert, `block_sparse_moe.experts.N.w1`
(gate [F, C]), `w3` (up [F, C]) and `w2` (down [C, F]); they are stacked here as transformers' conversion
mapping for mixtral does (MergeModulelist, then Concatenate(w1, w3) on dim 1).
"""

from __future__ import annotations

import dataclasses

import torch

from attnviz.loading.converters.llama import llama_config
from attnviz.loading.converters.llama_like import convert_decoder
from attnviz.loading.ledger import WeightLedger
from attnviz.transformer.config import ModelConfig


def mixtral_config(hf: dict) -> ModelConfig:
    # router_jitter_noise is ignored: HF applies it only while training.
    dense = llama_config({**hf, "model_type": "mixtral"})
    return dataclasses.replace(
        dense,
        family="mixtral",
        gated_mlp=False,
        n_experts=hf["num_local_experts"],
        experts_per_token=hf["num_experts_per_tok"],
        router="softmax_topk",
        expert_glu="gated",
        mlp_bias=False,
        sliding_window=hf.get("sliding_window"),
    )


def convert_mixtral(hf: dict, checkpoint: dict, model) -> dict:
    return convert_decoder(WeightLedger(checkpoint, "model."), model, mlp=_move_experts)


def _move_experts(w: WeightLedger, layer: str, ours: str, c) -> None:
    if w.has(f"{layer}mlp.gate.weight"):  # transformers 5's in-memory layout
        w.move(f"{layer}mlp.gate.weight", f"{ours}mlp.router.weight")
        w.move(f"{layer}mlp.experts.gate_up_proj", f"{ours}mlp.gate_up")
        w.move(f"{layer}mlp.experts.down_proj", f"{ours}mlp.down")
    else:  # the hub's per-expert layout
        moe = f"{layer}block_sparse_moe."
        w.move(f"{moe}gate.weight", f"{ours}mlp.router.weight")
        experts = range(c.n_experts)
        gate = torch.stack([w.take(f"{moe}experts.{e}.w1.weight") for e in experts])  # E, F, C
        up = torch.stack([w.take(f"{moe}experts.{e}.w3.weight") for e in experts])  # E, F, C
        w.put(f"{ours}mlp.gate_up", torch.cat((gate, up), dim=1))  # E, 2F, C
        w.put(f"{ours}mlp.down", torch.stack([w.take(f"{moe}experts.{e}.w2.weight") for e in experts]))
