"""Head profiles (Clark et al. 2019 sec. 3; Voita et al. 2019) on synthetic heads with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnviz.analysis.profile import profile_head, profile_heads, punctuation_tokens
from attnviz.trace import AttentionTrace

TOKENS = ["[CLS]", "Hello", ",", " wor", "ld", " again", " .", "[SEP]"]
OFFSETS = [(0, 0), (0, 5), (5, 6), (6, 10), (10, 12), (12, 18), (18, 20), (0, 0)]
T = len(TOKENS)


def trace_of(attentions: np.ndarray, special_mask: bool = True) -> AttentionTrace:
    sequence_ids = [None if t in ("[CLS]", "[SEP]") else 0 for t in TOKENS]
    return AttentionTrace(
        tokens=list(TOKENS),
        offsets=list(OFFSETS),
        sequence_ids=sequence_ids,
        input_ids=list(range(T)),
        attentions=attentions.astype(np.float32),
        kv_group=list(range(attentions.shape[1])),
        words=[],
        word_of_token=[None] * T,
        truncated=False,
        special_mask=[s is None for s in sequence_ids] if special_mask else [],
    )


def heads() -> np.ndarray:
    """[2, 3, T, T]: previous token, uniform, [CLS]; next token, self, punctuation."""
    rows = np.arange(T)
    previous = np.zeros((T, T))
    previous[rows, np.maximum(rows - 1, 0)] = 1.0  # row 0 has nothing before it: attends to itself
    following = np.zeros((T, T))
    following[rows, np.minimum(rows + 1, T - 1)] = 1.0
    cls = np.zeros((T, T))
    cls[:, 0] = 1.0
    punctuation = np.zeros((T, T))
    punctuation[:, [2, 6]] = 0.5
    return np.stack([[previous, np.full((T, T), 1.0 / T), cls], [following, np.eye(T), punctuation]])


def test_previous_token_head_is_positional():
    profile = profile_heads(trace_of(heads()))
    assert profile.positional[0, 0]
    assert profile.positional_offset[0, 0] == -1
    assert profile.positional_share[0, 0] == 1.0
    assert profile.previous[0, 0] == 1.0
    assert profile.next[0, 0] == 0.0
    assert profile.mean_distance[0, 0] == pytest.approx((T - 1) / T)
    assert profile.positional[1, 0] and profile.positional_offset[1, 0] == 1 and profile.next[1, 0] == 1.0
    assert profile.positional[1, 1] and profile.positional_offset[1, 1] == 0 and profile.self[1, 1] == 1.0
    assert not profile.positional[0, 2]  # always [CLS]: the offset changes with the row
    assert not profile.positional[1, 2]


def test_uniform_attention_has_maximal_entropy():
    profile = profile_heads(trace_of(heads()))
    assert profile.entropy[0, 1] == pytest.approx(math.log(T), rel=1e-6)
    assert not profile.positional[0, 1]
    assert profile.confidence[0, 1] == pytest.approx(1.0 / T)
    assert profile.entropy[0, 0] == 0.0 and profile.confidence[0, 0] == 1.0


def test_causal_uniform_rows_have_entropy_log_of_visible_keys():
    causal = np.tril(np.ones((T, T)))
    causal /= causal.sum(-1, keepdims=True)
    profile = profile_heads(trace_of(causal[None, None]))
    expected = np.mean([math.log(i + 1) for i in range(T)])  # row 0 sees one key: entropy 0
    assert profile.entropy[0, 0] == pytest.approx(expected, rel=1e-6)
    assert not profile.positional[0, 0]


def test_special_first_and_punctuation_shares():
    profile = profile_heads(trace_of(heads()))
    assert profile.special[0, 2] == 1.0 and profile.first[0, 2] == 1.0
    assert profile.punctuation[1, 2] == 1.0 and profile.special[1, 2] == 0.0
    assert profile.special[0, 1] == pytest.approx(2.0 / T)
    assert profile.punctuation[0, 1] == pytest.approx(2.0 / T)
    assert np.flatnonzero(punctuation_tokens(trace_of(heads()))).tolist() == [2, 6]  # "," and " ."
    # without a special mask, tokens outside both sentences are the specials
    fallback = profile_heads(trace_of(heads(), special_mask=False))
    np.testing.assert_array_equal(fallback.special, profile.special)


def test_one_head_equals_the_grid():
    rng = np.random.default_rng(0)
    attentions = rng.random((2, 3, T, T))
    attentions /= attentions.sum(-1, keepdims=True)
    trace = trace_of(attentions)
    grid = profile_heads(trace)
    for layer, head in [(0, 0), (1, 2)]:
        one = profile_head(trace, layer, head)
        expected = grid.head(layer, head)
        assert one.keys() == expected.keys()
        for key, value in expected.items():
            assert one[key] == pytest.approx(value)
    with pytest.raises(ValueError):
        profile_head(trace, 2, 0)


def test_profile_does_not_mutate_the_trace():
    attentions = heads()
    trace = trace_of(attentions)
    before = trace.attentions.copy()
    profile_heads(trace)
    np.testing.assert_array_equal(trace.attentions, before)
