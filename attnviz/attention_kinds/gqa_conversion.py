"""MHA -> GQA by mean-pooling key and value heads, and how far that moves a model without retraining.

Ainslie et al. 2023 ("GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
Checkpoints", section 2.1) build a GQA model from an MHA checkpoint by replacing the key and value
projection heads of each group with their mean, then uptrain briefly. This module does the first step
only and measures, on one input, how much the attention maps and the final hidden states move: the
distance uptraining would have to recover.

Query head h reads KV head h // (H / K) (`attention.repeat_kv`), so group j pools the contiguous KV heads
j * (K / g) .. (j + 1) * (K / g) - 1; weights and biases are pooled alike. The converted model is a new
module: its structure is copied, the unchanged parameters are shared with the original (read-only, no
extra memory) and only the pooled projections are new, so the loaded (shared, cached) model is never
touched. With g = K every mean is over one head: the copy computes bit for bit what the original does.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attnviz.analysis.kv_groups import js_distance
from attnviz.transformer.model import Transformer


def pool_heads(linear: nn.Linear, n_heads: int, n_groups: int, head_dim: int) -> nn.Linear:
    """A new Linear whose output heads are the means of `n_heads // n_groups` consecutive heads."""
    per_group = n_heads // n_groups
    weight = linear.weight.detach().view(n_groups, per_group, head_dim, -1).mean(dim=1)  # g, D, C
    pooled = nn.Linear(linear.in_features, n_groups * head_dim, bias=linear.bias is not None,
                       device=linear.weight.device, dtype=linear.weight.dtype)
    with torch.no_grad():
        pooled.weight.copy_(weight.reshape(n_groups * head_dim, -1))
        if linear.bias is not None:
            pooled.bias.copy_(linear.bias.detach().view(n_groups, per_group, head_dim).mean(dim=1).reshape(-1))
    pooled.requires_grad_(False)
    return pooled


def mean_pool_kv(module: Transformer, n_groups: int) -> Transformer:
    """A copy of `module` with its K and V heads mean-pooled into `n_groups` groups per layer."""
    k_heads = module.config.kv_heads
    if n_groups < 1 or k_heads % n_groups:
        raise ValueError(f"groups ({n_groups}) must divide the model's key/value heads ({k_heads})")
    # Share every parameter and buffer (memo maps each to itself); copy the modules around them.
    memo = {id(t): t for t in (*module.parameters(), *module.buffers())}
    converted = copy.deepcopy(module, memo)
    converted.config = dataclasses.replace(module.config, n_kv_heads=n_groups)
    for block in converted.blocks:
        attn = block.attn
        attn.k_proj = pool_heads(attn.k_proj, k_heads, n_groups, attn.head_dim)
        attn.v_proj = pool_heads(attn.v_proj, k_heads, n_groups, attn.head_dim)
        attn.n_kv_heads = n_groups
    return converted.eval()


@dataclass(frozen=True)
class ConversionDistances:
    """How far the pooled model moved from the original on one input, per layer and at the output."""

    n_groups: int
    n_tokens: int
    js_mean: np.ndarray  # L: mean JS distance (base 2, in [0, 1]) over heads and query rows
    js_max: np.ndarray  # L: the largest JS distance of any head's row
    max_abs: np.ndarray  # L: max |attention difference|
    hidden_relative_l2: float  # ||h' - h|| / ||h|| over every token of the final hidden states
    hidden_cosine: float  # mean over tokens of cos(h'_t, h_t)


@torch.inference_mode()
def conversion_distances(module: Transformer, input_ids, n_groups: int, token_type_ids=None) -> ConversionDistances:
    """Run the original and its mean-pooled copy on the same ids [T] (or [1, T]) and compare."""
    device = next(module.parameters()).device
    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device).reshape(1, -1)
    types = None if token_type_ids is None else torch.as_tensor(token_type_ids, device=device).reshape(1, -1)
    converted = mean_pool_kv(module, n_groups)
    before = module(ids, token_type_ids=types, with_logits=False)
    after = converted(ids, token_type_ids=types, with_logits=False)
    a = before.attentions[:, 0].float().cpu().numpy()  # L, H, T, T
    b = after.attentions[:, 0].float().cpu().numpy()
    js = js_distance(a, b)  # L, H, T
    h, h2 = before.hidden[0].double(), after.hidden[0].double()  # T, C
    relative = float((h2 - h).norm() / h.norm())
    cosine = float(torch.nn.functional.cosine_similarity(h2, h, dim=-1).mean())
    return ConversionDistances(
        n_groups=n_groups, n_tokens=ids.shape[1], js_mean=js.mean(axis=(1, 2)), js_max=js.max(axis=(1, 2)),
        max_abs=np.abs(a - b).max(axis=(1, 2, 3)), hidden_relative_l2=relative, hidden_cosine=cosine)


def group_choices(n_kv_heads: int) -> list[int]:
    """Every g that divides the model's KV heads, largest first (g = K: nothing pooled)."""
    return [g for g in range(n_kv_heads, 0, -1) if n_kv_heads % g == 0]
