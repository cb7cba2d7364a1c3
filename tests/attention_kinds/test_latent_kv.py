"""KV cache bytes per token of MHA, GQA, MQA and MLA (attnviz.attention_kinds.latent_kv), measured from the cache
tensors after decoding, against what each variant must hold: 2 x KV heads x head_dim numbers a token, or MLA's
latent plus its rotary key; and the loaded model's own sizes where it is MLA."""

from __future__ import annotations

from attnviz.attention_kinds.latent_kv import ORIGINAL, LatentSizes, measure, sizes_of
from tests.helpers.tiny_hf import tiny


def test_the_original_transformers_size_with_deepseeks_ratio():
    result = measure(**ORIGINAL)
    assert result.latent == LatentSizes(kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    per_layer = {row.kind: row.bytes_per_token for row in result.rows}
    assert per_layer == {"MHA": 2 * 8 * 64 * 4, "GQA": 2 * 2 * 64 * 4, "MQA": 2 * 64 * 4, "MLA": (256 + 32) * 4}
    assert all(row.model_bytes_per_token == 6 * row.bytes_per_token for row in result.rows)
    assert all(row.per_token * 4 == row.bytes_per_token for row in result.rows)  # float32 tensors, nothing else


def test_an_mla_model_is_measured_at_its_own_latent():
    config = tiny("deepseek_v3").config
    sizes = sizes_of(config)
    assert sizes["latent"] == LatentSizes(16, 12, 8, 10) and sizes["head_dim"] == 10 and sizes["groups"] is None
    rows = {row.kind: row for row in measure(**sizes).rows}
    assert rows["MLA"].bytes_per_token == (16 + 8) * 4 and rows["MHA"].bytes_per_token == 2 * 4 * 10 * 4
    assert rows["MLA"].model_bytes_per_token == 3 * (16 + 8) * 4
