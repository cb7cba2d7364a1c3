"""The full maps made block by block (attnviz.transformer.attention.full_maps over `masked_blocks`: the scores,
softmax and context of the keys a causal or windowed row cannot see never computed) equal HF eager's, on a tiny
random model of every registered self-attention family (the encoders too, on the whole-map path but for
ModernBERT's windowed layers), with blocks of 4 rows so that a 23-token batch (the second row right-padded) runs
many blocks, windowed ones among them."""

from __future__ import annotations

import pytest
import torch

from attnviz.loading.registry import CONVERTERS
from attnviz.transformer import attention
from attnviz.transformer.model import Transformer
from tests.helpers.tiny_hf import assert_parity, tiny_pair

FAMILIES = [t for t, c in CONVERTERS.items() if c.module is Transformer and t != "gemma3"]
T, PAD = 23, 5


@pytest.mark.parametrize("model_type", FAMILIES)
def test_blocked_full_maps_equal_hf_eager(model_type, monkeypatch):
    ours, hf = tiny_pair(model_type)
    if hasattr(hf, "set_experts_implementation") and hf._can_set_experts_implementation():
        hf.set_experts_implementation("eager")  # HF's grouped_mm wants 16-byte strides a tiny model lacks
    monkeypatch.setattr(attention, "FULL_BLOCK_ROWS", 4)
    blocked = []
    made = attention.masked_blocks

    def spy(mask, t, s):
        plans = made(mask, t, s)
        blocked.append(plans is not None and any(plan.c1 - plan.c0 < s for plan in plans))
        return plans

    monkeypatch.setattr(attention, "masked_blocks", spy)
    ids = torch.randint(3, 99, (2, T), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    ids[1, -PAD:], mask[1, -PAD:] = 0, 0
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask, output_attentions=True)
        base = hf.base_model(input_ids=ids, attention_mask=mask)
        out = ours(ids, mask)
    if ours.config.causal:
        assert blocked and all(blocked), model_type  # every layer took the blocked path
    else:  # an encoder's rows see every key, but for ModernBERT's local (windowed) layers
        assert any(blocked) == (model_type == "modernbert"), model_type
    assert_parity(out, ref.attentions, base.last_hidden_state, mask)
