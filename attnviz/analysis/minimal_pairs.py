"""Minimal pairs: two sentences that differ in one place, aligned by words, and the per-head difference
of their word-level attention.

Alignment (`align_words`): the longest common prefix of words, then the longest common suffix of what
is left; what remains in each sentence is its differing span (`span_a`, `span_b`, half-open word
ranges). A substitution ("are" / "is") has a span of one or more words on both sides; an insertion has
an empty span on one side. Words compare as exact strings; words follow the trace's word rule
(`attnviz.trace.split_words`: whitespace, jieba's words in a run of Han characters, every other CJK
character and every punctuation mark a word of its own), so Chinese pairs align by jieba's words.

Slots: the two sentences are compared on one axis of `prefix + 1 + suffix` slots: the common prefix
words, one slot for the differing span, then the common suffix words. Outside the span, slot k is the
same word in both sentences, so rows and columns map one to one. The differing span of each sentence
is pooled into its one slot by the word-level rule itself, as if the span were one word (its row is
the mean over the span's tokens, its column the sum over them): "are" and "is" face each other, and so
do "ever" and nothing. A slot with no token on a side (the empty span of an insertion; a word lost to
truncation) has NaN rows and columns on that side, so the difference there is NaN, never a made-up
number. Special tokens belong to no word and drop out, as in the word-level view.

Difference = sentence A minus sentence B, per layer and head, [L, H, n_slots, n_slots] float64.
The per-head summary is the largest |difference| over all slots, NaN ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnviz.analysis.scoring import word_attention_matrix
from attnviz.trace import AttentionTrace, is_cjk, split_words

EMPTY_SPAN = "∅"  # how the empty side of an insertion reads in the changed slot's label


@dataclass(frozen=True)
class PairAlignment:
    """Two word sequences aligned by their common prefix and suffix (see the module docstring)."""

    words_a: tuple[str, ...]
    words_b: tuple[str, ...]
    prefix: int  # common leading words
    suffix: int  # common trailing words

    @property
    def span_a(self) -> tuple[int, int]:
        return self.prefix, len(self.words_a) - self.suffix

    @property
    def span_b(self) -> tuple[int, int]:
        return self.prefix, len(self.words_b) - self.suffix

    @property
    def n_slots(self) -> int:
        return self.prefix + 1 + self.suffix

    @property
    def changed_slot(self) -> int:
        return self.prefix

    @property
    def kind(self) -> str:
        """"substitution" (words on both sides of the span) or "insertion" (an empty side)."""
        (a0, a1), (b0, b1) = self.span_a, self.span_b
        return "substitution" if a1 > a0 and b1 > b0 else "insertion"

    def changed_words(self, side: str) -> tuple[str, ...]:
        start, end = self.span_a if side == "a" else self.span_b
        return (self.words_a if side == "a" else self.words_b)[start:end]

    def labels(self, sep: str = " ") -> list[str]:
        """One label per slot: the common words, and "are→is" (or "∅→ever") for the differing span."""
        changed = "→".join(sep.join(self.changed_words(side)) or EMPTY_SPAN for side in ("a", "b"))
        return [*self.words_a[: self.prefix], changed, *self.words_a[len(self.words_a) - self.suffix:]]

    def slot_of_word(self, side: str) -> list[int]:
        """The slot of each word of sentence `side` ("a" or "b")."""
        words = self.words_a if side == "a" else self.words_b
        start, end = self.span_a if side == "a" else self.span_b
        return [w if w < start else self.prefix if w < end else self.prefix + 1 + (w - end)
                for w in range(len(words))]


def align_words(words_a: Sequence[str], words_b: Sequence[str]) -> PairAlignment:
    """Common prefix, then common suffix of the rest; ValueError when the sentences are the same words."""
    a, b = tuple(words_a), tuple(words_b)
    if not a or not b:
        raise ValueError("both sentences need at least one word")
    if a == b:
        raise ValueError("the two sentences have the same words: there is nothing to compare")
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    # Bounded by what the prefix left, so "a a" / "a" aligns as prefix 1, suffix 0 (one insertion).
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    return PairAlignment(a, b, prefix, suffix)


def align_texts(text_a: str, text_b: str) -> PairAlignment:
    """`align_words` on the words of two free texts by the trace's word rule."""
    return align_words(_words(text_a), _words(text_b))


def _words(text: str) -> list[str]:
    return [text[start:end] for start, end in split_words(text)]


def slot_attention(
    attentions: np.ndarray, word_of_token: Sequence[int | None], alignment: PairAlignment, side: str
) -> np.ndarray:
    """Word-level attention [L, H, n_slots, n_slots] (float64) of one sentence of the pair on the shared
    slot axis: the word rule of `scoring.word_attention_matrix`, with the differing span pooled as one
    word; slots with no token on this side are NaN rows and columns."""
    slots = alignment.slot_of_word(side)
    n_words = len(slots)
    slot_of_token = []
    for w in word_of_token:
        if w is not None and not 0 <= w < n_words:
            raise ValueError(f"word index {w} is out of range for {n_words} words of sentence {side}")
        slot_of_token.append(None if w is None else slots[w])
    matrix = word_attention_matrix(attentions, slot_of_token, alignment.n_slots)
    empty = np.setdiff1d(np.arange(alignment.n_slots), [s for s in slot_of_token if s is not None])
    matrix[:, :, empty, :] = np.nan
    matrix[:, :, :, empty] = np.nan
    return matrix


@dataclass(frozen=True)
class PairDifference:
    alignment: PairAlignment
    labels: list[str]  # one per slot
    a: np.ndarray  # [L, H, n, n] slot attention of sentence A
    b: np.ndarray  # [L, H, n, n] of sentence B
    difference: np.ndarray  # a - b

    @property
    def max_abs(self) -> np.ndarray:
        """[L, H]: the largest |difference| of each head over all slots, NaN ignored (0 if all NaN)."""
        # |difference| >= 0, so NaN -> 0 never wins over a real cell and an all-NaN head gives 0.
        magnitude = np.nan_to_num(np.abs(self.difference), nan=0.0)
        return magnitude.reshape(*magnitude.shape[:2], -1).max(axis=-1)


def attention_difference(
    attentions_a: np.ndarray,
    word_of_token_a: Sequence[int | None],
    attentions_b: np.ndarray,
    word_of_token_b: Sequence[int | None],
    alignment: PairAlignment,
    sep: str = " ",
) -> PairDifference:
    """Per-head difference A - B of slot attention; attentions are [L, H, T, T] of each sentence."""
    if np.shape(attentions_a)[:2] != np.shape(attentions_b)[:2]:
        raise ValueError(f"layers x heads differ: {np.shape(attentions_a)[:2]} and {np.shape(attentions_b)[:2]}")
    a = slot_attention(attentions_a, word_of_token_a, alignment, "a")
    b = slot_attention(attentions_b, word_of_token_b, alignment, "b")
    return PairDifference(alignment, alignment.labels(sep), a, b, a - b)


def trace_difference(trace_a: AttentionTrace, trace_b: AttentionTrace) -> PairDifference:
    """`attention_difference` of two single-sentence traces, aligned by their own words."""
    for name, trace in (("A", trace_a), ("B", trace_b)):
        if len(trace.texts) > 1:
            raise ValueError(f"trace {name} holds a sentence pair; compare single sentences")
    attentions = [np.asarray(trace.attentions) for trace in (trace_a, trace_b)]
    for name, array, trace in zip("AB", attentions, (trace_a, trace_b)):
        if array.ndim != 4 or array.shape[2] != array.shape[3] or array.shape[2] != len(trace.word_of_token):
            raise ValueError(f"trace {name}: expected self-attention [L, H, T, T] over its tokens, got {array.shape}")
    alignment = align_words(trace_a.words, trace_b.words)
    sep = "" if _is_cjk_span(alignment) else " "
    return attention_difference(attentions[0], trace_a.word_of_token, attentions[1], trace_b.word_of_token,
                                alignment, sep)


def _is_cjk_span(alignment: PairAlignment) -> bool:
    # Chinese words are characters: a changed span of several reads joined ("一只"), not "一 只".
    words = alignment.changed_words("a") + alignment.changed_words("b")
    return bool(words) and all(len(w) == 1 and is_cjk(w) for w in words)
