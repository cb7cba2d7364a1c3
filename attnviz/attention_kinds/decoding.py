"""Greedy decoding of a decoder `Transformer`, with or without a KV cache.

With the cache the prompt is run once and every later step feeds only the new token, attending over the
keys and values the cache holds (HF's `generate` with `use_cache=True`); without it every step runs the
whole sequence again. Both give the same tokens; the cache only saves work.
"""

from __future__ import annotations

import torch

from attnviz.transformer.kv_cache import KVCache
from attnviz.transformer.model import Transformer
from attnviz.transformer.record import Recorder


@torch.inference_mode()
def greedy_decode(
    model: Transformer, input_ids: torch.Tensor, max_new_tokens: int, eos_token_id: int | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """input_ids [B, T] -> [B, T + n] with n <= max_new_tokens new tokens, each the argmax of the last
    position's logits. Stops early when every row has produced `eos_token_id` (rows that finished
    earlier keep producing, as the argmax is all this function knows; HF pads them instead, so compare
    with a single row or without an EOS)."""
    if not model.config.causal or model.lm_head is None:
        raise ValueError("greedy decoding needs a causal model with an LM head")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    ids = input_ids
    cache = KVCache(len(model.blocks)) if use_cache else None
    step_input = ids
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        out = model(step_input, record=Recorder(), cache=cache)  # records nothing: no attention maps kept
        next_id = out.logits[:, -1].argmax(dim=-1, keepdim=True)  # B, 1
        ids = torch.cat((ids, next_id), dim=1)
        step_input = next_id if use_cache else ids
        if eos_token_id is not None:
            done |= next_id[:, 0] == eos_token_id
            if bool(done.all()):
                break
    return ids

