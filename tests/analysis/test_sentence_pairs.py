"""Sentence-pair filters (bertviz's A->B, B->A, A->A, B->B), the sentence divider and incoming/outgoing lines,
on a hand-made two-sentence trace whose slices are written out by hand."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from attnviz import plots
from attnviz.analysis.sentence_pairs import (
    focus_lines,
    label_sentences,
    pair_indices,
    slice_pair,
    view_sequence,
)
from attnviz.analysis.views import attention_view
from attnviz.trace import AttentionTrace

# [CLS] the cat [SEP] a dog barks [SEP]: sentence A is positions 1-2, B is 4-6.
TOKENS = ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "barks", "[SEP]"]
SEQUENCE = [None, 0, 0, None, 1, 1, 1, None]


def softmax_rows(shape, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=shape) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture
def trace() -> AttentionTrace:
    offsets = [(0, 0), (0, 3), (4, 7), (0, 0), (0, 1), (2, 5), (6, 11), (0, 0)]
    return AttentionTrace(
        tokens=TOKENS, offsets=offsets, sequence_ids=SEQUENCE, input_ids=list(range(8)),
        attentions=softmax_rows((2, 3, 8, 8)), kv_group=[0, 1, 2],
        words=["the", "cat", "a", "dog", "barks"], word_of_token=[None, 0, 1, None, 2, 3, 4, None],
        truncated=False, texts=("the cat", "a dog barks"), word_spans=[(0, 3), (4, 7), (0, 1), (2, 5), (6, 11)],
        word_sequence=[0, 0, 1, 1, 1], special_mask=[s is None for s in SEQUENCE],
    )


def segments(fig: go.Figure) -> dict[tuple[int, int], str]:
    """(row, column) of every drawn line, with its colour."""
    drawn = {}
    for trace in fig.data:
        if trace.mode != "lines":
            continue
        y = np.asarray(trace.y)
        for a, b in zip(y[0::3], y[1::3]):
            drawn[(int(a), int(b))] = trace.line.color
    return drawn


def test_specials_go_with_the_sentence_they_precede_as_bertviz():
    # bertviz splits at sentence_b_start: [CLS] and the first [SEP] are A, the last [SEP] is B.
    assert label_sentences(SEQUENCE) == [0, 0, 0, 0, 1, 1, 1, 1]
    # RoBERTa's "<s> A </s></s> B </s>": both middle separators stay with A.
    assert label_sentences([None, 0, None, None, 1, None]) == [0, 0, 0, 0, 1, 1]
    assert label_sentences([None, 0, 0, None]) == [0, 0, 0, 0]  # one sentence: no B at all


def test_filters_slice_rows_as_queries_and_columns_as_keys(trace):
    m = trace.attentions[1, 2]
    sides = label_sentences(SEQUENCE)
    expected = {"all": m, "ab": m[0:4, 4:8], "ba": m[4:8, 0:4], "aa": m[0:4, 0:4], "bb": m[4:8, 4:8]}
    for pair, block in expected.items():
        part = slice_pair(sides, TOKENS, pair)
        np.testing.assert_array_equal(part.take(m), block)  # not renormalised: bertviz shows raw weights
    ab = slice_pair(sides, TOKENS, "ab")
    assert ab.row_labels == ["[CLS]", "the", "cat", "[SEP]"] and ab.col_labels == ["a", "dog", "barks", "[SEP]"]
    with pytest.raises(ValueError, match="pair"):
        pair_indices(sides, "a->b")


def test_divider_sits_before_the_first_token_of_sentence_b(trace):
    sides = label_sentences(SEQUENCE)
    assert (slice_pair(sides, TOKENS).row_divider, slice_pair(sides, TOKENS).col_divider) == (4, 4)
    ab = slice_pair(sides, TOKENS, "ab")
    assert (ab.row_divider, ab.col_divider) == (None, None)  # each side holds one sentence
    fig = plots.head_heatmap(trace.attentions[0, 0], TOKENS, TOKENS, row_divider=4, col_divider=4)
    rows = [s for s in fig.layout.shapes if s.name == "divider rows"]
    cols = [s for s in fig.layout.shapes if s.name == "divider columns"]
    # Between category 3 ([SEP]) and 4 (a): at 3.5 on both axes.
    assert rows and all(s.y0 == s.y1 == 3.5 for s in rows) and all(s.x0 == s.x1 == 3.5 for s in cols)
    assert not plots.head_heatmap(trace.attentions[0, 0], TOKENS, TOKENS).layout.shapes
    view = plots.head_view(trace.attentions[0, 0], TOKENS, TOKENS, left_divider=4, right_divider=4)
    assert sorted((s.name, s.y0) for s in view.layout.shapes) == [("divider left", 3.5), ("divider right", 3.5)]


def test_hidden_specials_and_word_level_keep_the_views_positions(trace):
    for level, hide, expected in (("token", False, SEQUENCE), ("token", True, [0, 0, 1, 1, 1]),
                                  ("word", False, [0, 0, 1, 1, 1])):
        sequence = view_sequence(trace, level, hide)
        assert sequence == expected
        assert len(sequence) == len(attention_view(trace, level, hide).labels)
    sides = label_sentences(view_sequence(trace, "word"))
    words = attention_view(trace, "word").labels
    assert slice_pair(sides, words).row_divider == 2
    assert slice_pair(sides, words, "ba").row_labels == ["a", "dog", "barks"]


def test_outgoing_lines_are_the_row_and_incoming_the_column():
    m = softmax_rows((8, 8), seed=3)
    m[2, 5] = 0.01  # below the threshold: no line
    threshold = 0.02
    out = segments(plots.head_view(m, TOKENS, TOKENS, threshold=threshold, focus=5))
    assert set(out) == {(5, j) for j in range(8) if m[5, j] >= threshold}
    incoming = segments(plots.head_view(m, TOKENS, TOKENS, threshold=threshold, focus_in=5))
    assert set(incoming) == {(i, 5) for i in range(8) if m[i, 5] >= threshold}
    assert (2, 5) not in incoming and set(incoming.values()) == {plots.IN_COLOR}
    both = segments(plots.head_view(m, TOKENS, TOKENS, threshold=threshold, focus=5, focus_in=5))
    assert set(both) == set(out) | set(incoming)
    assert both[(5, 5)] == plots.FOCUS_COLOR  # the self-line is drawn once, as outgoing
    assert {both[(i, 5)] for i in range(8) if i != 5 and (i, 5) in both} == {plots.IN_COLOR}


def test_focus_follows_the_filter_and_the_direction():
    sides = label_sentences(SEQUENCE)
    dog = 5  # in B
    assert focus_lines(dog, range(8), range(8), "out") == (dog, None)
    assert focus_lines(dog, range(8), range(8), "in") == (None, dog)
    assert focus_lines(dog, range(8), range(8), "both") == (dog, dog)
    ba = slice_pair(sides, TOKENS, "ba", focus=dog, direction="both")
    assert (ba.focus_row, ba.focus_col) == (1, None)  # dog's row is B's second; A's columns lack it
    ab = slice_pair(sides, TOKENS, "ab", focus=dog, direction="in")
    assert (ab.focus_row, ab.focus_col) == (None, 1)
    aa = slice_pair(sides, TOKENS, "aa", focus=dog, direction="both")
    assert (aa.focus_row, aa.focus_col) == (None, None)  # the page says the token has no lines here
    with pytest.raises(ValueError, match="direction"):
        focus_lines(dog, range(8), range(8), "sideways")
    # In the filtered figure, dog's incoming lines under A->B are column 1 of m[A, B].
    m = softmax_rows((8, 8), seed=4)
    fig = plots.head_view(ab.take(m), ab.row_labels, ab.col_labels, focus_in=ab.focus_col)
    assert set(segments(fig)) == {(i, 1) for i in range(4)}
    np.testing.assert_array_equal(ab.take(m)[:, 1], m[0:4, dog])
