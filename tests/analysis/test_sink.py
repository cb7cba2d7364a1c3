"""The first-token sink (attnviz/analysis/sink.py) on a hand-made causal trace, numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.analysis.sink import (
    FIRST_TOKEN_EPSILON,
    first_token_aside,
    first_token_share,
    trace_first_aside,
)
from attnviz.analysis.views import attention_view
from attnviz.trace import AttentionTrace

# One layer, three heads, four tokens of "Dogs bark loudly" ("Dogs" is two tokens: Do + gs). Rows are causal.
SINK = [[1, 0, 0, 0], [0.9, 0.1, 0, 0], [0.8, 0.1, 0.1, 0], [0.7, 0.1, 0.1, 0.1]]  # mean on token 0: 0.85
PREVIOUS = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]  # previous token: mean on token 0: 0.5
SPREAD = [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]]  # mean on token 0: 0.375 - 0.25
ATTENTIONS = np.array([[SINK, PREVIOUS, SPREAD]], dtype=np.float32)  # [1, 3, 4, 4]


def hand_made_trace() -> AttentionTrace:
    return AttentionTrace(
        tokens=["Do", "gs", " bark", " loudly"], offsets=[(0, 2), (2, 4), (4, 9), (9, 16)],
        sequence_ids=[0, 0, 0, 0], input_ids=[1, 2, 3, 4], attentions=ATTENTIONS, kv_group=[0, 1, 2],
        words=["Dogs", "bark", "loudly"], word_of_token=[0, 0, 1, 2], texts=("Dogs bark loudly", None),
        word_spans=[(0, 4), (5, 9), (10, 16)], word_sequence=[0, 0, 0], special_mask=[False] * 4,
        truncated=False, metadata={"causal": True},
    )


def test_first_token_share_is_the_mean_weight_on_token_0_and_counts_heads_above_epsilon():
    share = first_token_share(ATTENTIONS)
    np.testing.assert_allclose(share.per_head, [[0.85, 0.5, 0.375]])  # (1 + .9 + .8 + .7) / 4, 2 / 4, 1.5 / 4
    assert FIRST_TOKEN_EPSILON == 0.3  # Gu et al. 2024's epsilon
    assert share.above == 3 and share.share_above == 1.0
    np.testing.assert_allclose(share.mean, (0.85 + 0.5 + 0.375) / 3)
    assert first_token_share(ATTENTIONS, epsilon=0.6).above == 1  # only the sink head
    assert first_token_share(ATTENTIONS, epsilon=0.375).above == 2  # strictly above, as Gu et al.


def test_setting_the_first_token_aside_renormalises_each_row_without_it():
    aside = first_token_aside(ATTENTIONS)
    assert aside.dtype == np.float32 and aside.shape == ATTENTIONS.shape
    np.testing.assert_allclose(aside[0, 0], [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0.5, 0.5, 0], [0, 1 / 3, 1 / 3, 1 / 3]],
                               atol=1e-6)
    np.testing.assert_allclose(aside[0, 1, 1], 0)  # all its weight was on token 0: nothing left to share
    np.testing.assert_allclose(aside[0, 2, 1], [0, 1, 0, 0])
    assert first_token_aside(ATTENTIONS.astype(np.float16)).dtype == np.float16
    np.testing.assert_array_equal(ATTENTIONS[0, 0, 1], np.float32([0.9, 0.1, 0, 0]))  # the input is not changed
    with pytest.raises(ValueError, match="shape"):
        first_token_aside(np.zeros((2, 0)))


def test_the_token_view_drops_the_first_token_and_the_word_view_pools_the_others():
    trace = hand_made_trace()
    aside = trace_first_aside(trace)
    tokens = attention_view(aside, "token", True)
    assert tokens.labels == ["gs", " bark", " loudly"]
    np.testing.assert_allclose(tokens.attentions[0, 0], [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-3)
    words = attention_view(aside, "word")
    assert words.labels == ["Dogs", "bark", "loudly"]  # "Dogs" keeps its second token
    np.testing.assert_allclose(words.attentions[0, 0], [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-3)
    assert trace.word_of_token == [0, 0, 1, 2] and trace.special_mask == [False] * 4  # the input is not changed
    assert aside.special_mask == [True, False, False, False]
