"""The attention module on its own: textbook shapes, MHA/MQA/GQA equivalences, masks, head mask."""

from __future__ import annotations

import pytest
import torch

from attnviz.transformer.attention import MultiHeadAttention, repeat_kv, scaled_dot_product_attention
from attnviz.transformer.masks import causal_mask

torch.manual_seed(0)


def test_textbook_shapes():
    mha = MultiHeadAttention(d_model=512, n_heads=8)
    out, attn = mha(torch.randn(2, 10, 512))
    assert out.shape == (2, 10, 512)
    assert attn.shape == (2, 8, 10, 10)


def test_cross_attention_shapes():
    mha = MultiHeadAttention(d_model=64, n_heads=4, n_kv_heads=2)
    out, attn = mha(torch.randn(2, 5, 64), kv=torch.randn(2, 7, 64))
    assert out.shape == (2, 5, 64) and attn.shape == (2, 4, 5, 7)


@pytest.mark.parametrize("n_kv_heads", [3, 0, 5])
def test_kv_heads_must_divide(n_kv_heads):
    with pytest.raises(ValueError, match="must divide"):
        MultiHeadAttention(d_model=64, n_heads=8, n_kv_heads=n_kv_heads)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_equals_mha_with_repeated_kv(n_kv_heads):
    """A GQA/MQA layer equals an MHA layer whose K/V weights repeat each KV head for its query group."""
    d, h = 48, 6
    gqa = MultiHeadAttention(d, h, n_kv_heads)
    mha = MultiHeadAttention(d, h)
    head_dim, group = d // h, h // n_kv_heads
    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(n_kv_heads, head_dim, d)
            b = getattr(gqa, name).bias.view(n_kv_heads, head_dim)
            getattr(mha, name).weight.copy_(w.repeat_interleave(group, dim=0).reshape(h * head_dim, d))
            getattr(mha, name).bias.copy_(b.repeat_interleave(group, dim=0).reshape(h * head_dim))
    x = torch.randn(2, 9, d)
    out_g, attn_g = gqa(x)
    out_m, attn_m = mha(x)
    torch.testing.assert_close(attn_g, attn_m)
    torch.testing.assert_close(out_g, out_m)
    assert gqa.kv_group == [i // group for i in range(h)]


def test_repeat_kv_order_is_hf_order():
    x = torch.arange(2 * 3).float().view(1, 2, 3, 1)  # B=1, K=2, S=3, D=1
    y = repeat_kv(x, 2)
    assert y[0, :, 0, 0].tolist() == [0, 0, 3, 3]  # query heads 0,1 read KV 0; 2,3 read KV 1


def test_rows_sum_to_one_and_causal_zero_above_diagonal():
    mha = MultiHeadAttention(32, 4)
    _, attn = mha(torch.randn(3, 11, 32), mask=causal_mask(11))
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 4, 11))
    assert torch.all(attn.triu(diagonal=1) == 0)
    assert torch.all(attn[..., causal_mask(11)] > 0)  # everything visible gets some weight


def test_fully_padded_row_gives_no_nan():
    mha = MultiHeadAttention(32, 4)
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[1] = False  # the second sequence is all padding
    out, attn = mha(torch.randn(2, 6, 32), mask=keep & causal_mask(6))
    assert not torch.isnan(out).any() and not torch.isnan(attn).any()


def test_padding_mask_blocks_keys():
    mha = MultiHeadAttention(32, 4)
    keep = torch.tensor([[1, 1, 1, 0, 0]]).bool()[:, None, None, :]
    _, attn = mha(torch.randn(1, 5, 32), mask=keep)
    assert torch.all(attn[..., 3:] == 0)


def test_head_mask_equals_zeroing_o_proj_input_columns():
    d, h, head = 32, 4, 2
    mha = MultiHeadAttention(d, h, n_kv_heads=2)
    x = torch.randn(2, 7, d)
    head_mask = torch.ones(h)
    head_mask[head] = 0
    masked, _ = mha(x, head_mask=head_mask)
    zeroed = MultiHeadAttention(d, h, n_kv_heads=2)
    zeroed.load_state_dict(mha.state_dict())
    with torch.no_grad():
        zeroed.o_proj.weight[:, head * (d // h):(head + 1) * (d // h)] = 0
    expected, _ = zeroed(x)
    torch.testing.assert_close(masked, expected)
    assert not torch.allclose(masked, mha(x)[0])  # the ablation changed something


def test_softmax_runs_in_float32():
    """In bfloat16 the probabilities are float32 softmax cast back (as HF eager), not a bfloat16 softmax."""
    q, k, v = (torch.randn(1, 4, 50, 8, dtype=torch.bfloat16) * 3 for _ in range(3))
    _, probs = scaled_dot_product_attention(q, k, v)
    scores = torch.matmul(q * 8**-0.5, k.transpose(-2, -1))
    assert probs.dtype == torch.bfloat16
    assert torch.equal(probs, torch.softmax(scores.float(), dim=-1).to(torch.bfloat16))


class _Blocks:
    """A record for the "rows" kernel that keeps each block where it falls in the full map."""

    kernel, rows = "rows", 3

    def __init__(self, shape):
        self.probs = torch.full(shape, float("nan"))

    def wants(self, name):
        return False

    def reduce(self, probs, r0, c0, scores=None):
        self.probs[..., r0:r0 + probs.shape[-2], :] = 0.0  # the block's rows see nothing outside its columns
        self.probs[..., r0:r0 + probs.shape[-2], c0:c0 + probs.shape[-1]] = probs


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_every_attention_function_in_the_registry_computes_the_same_attention(kv_heads):
    """The registry's entries, picked by the record's `kernel` name: row blocks give the full maps' context
    and probabilities, with a window, a bias, a cap and sinks at once (MHA, GQA, MQA)."""
    from attnviz.transformer.attention import ATTENTION_FUNCTIONS

    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 10, 8, generator=g)
    k, v = (torch.randn(2, kv_heads, 10, 8, generator=g) for _ in range(2))
    extras = {"mask": causal_mask(10, 10, window=4), "scale": 0.3, "bias": torch.randn(1, 4, 10, 10, generator=g),
              "softcap": 2.0, "sinks": torch.randn(4, generator=g)}
    assert set(ATTENTION_FUNCTIONS) == {"full", "rows"}
    context, probs = scaled_dot_product_attention(q, k, v, **extras)
    blocks = _Blocks(probs.shape)
    blocked, none = scaled_dot_product_attention(q, k, v, record=blocks, **extras)
    assert none is None
    torch.testing.assert_close(blocked, context)
    torch.testing.assert_close(blocks.probs, probs)
