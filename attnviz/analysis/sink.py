"""The first token's attention sink: how much of each head's weight goes to position 0, and a trace with
that position set aside, so the rest of a decoder's attention can be read.

Names: the *first-token share* of a head is the mean over its query rows of the weight on position 0 (Gu
et al. 2024, "When Attention Sink Emerges in Language Models", their alpha_1^{l,h} for the first token:
every row can see position 0, so the mean runs over all rows, row 0 included). A head counts as a sink head
when its share exceeds FIRST_TOKEN_EPSILON = 0.3, their epsilon; the share of such heads is their
Sink_1^epsilon metric. (A model's learned sink logits are another quantity, "learned-sink mass", not this.)

Setting the first token aside renormalises each row over the other positions, as hiding special tokens
does (analysis.views): the first token's column and its own row drop out of the token view, and it
belongs to no word in the word view. A row whose whole weight was on position 0 has nothing left to share
and stays 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnviz.trace import AttentionTrace

FIRST_TOKEN_EPSILON = 0.3  # Gu et al. 2024's epsilon: a head whose first-token share is above it is a sink


@dataclass(frozen=True)
class FirstTokenShare:
    """A model's first-token shares on one input: `per_head` [L, H] float64, and the summary over heads."""

    per_head: np.ndarray
    epsilon: float = FIRST_TOKEN_EPSILON

    @property
    def mean(self) -> float:
        """The mean first-token share over every head."""
        return float(self.per_head.mean()) if self.per_head.size else 0.0

    @property
    def above(self) -> int:
        """Heads whose share is above `epsilon`."""
        return int((self.per_head > self.epsilon).sum())

    @property
    def share_above(self) -> float:
        """The share of heads above `epsilon` (Gu et al.'s Sink_1^epsilon)."""
        return self.above / self.per_head.size if self.per_head.size else 0.0


def first_token_share(attentions: np.ndarray, epsilon: float = FIRST_TOKEN_EPSILON) -> FirstTokenShare:
    """The first-token share of every head of attentions [L, H, T, S] (see the module docstring)."""
    a = np.asarray(attentions)
    if a.ndim != 4 or a.shape[-1] == 0 or a.shape[-2] == 0:
        raise ValueError(f"expected attentions [L, H, T, S] with T, S >= 1, got shape {a.shape}")
    return FirstTokenShare(np.asarray(a[..., 0], dtype=np.float64).mean(axis=-1), epsilon)


def first_token_aside(attentions: np.ndarray) -> np.ndarray:
    """attentions [..., T, S] with column 0 set to 0 and each row renormalised over the other columns
    (computed in float32 one leading index at a time; returned in float32, or float16 for a float16 input).
    Row 0 of a causal map sees only position 0, so it becomes all zeros."""
    a = np.asarray(attentions)
    if a.ndim < 2 or a.shape[-1] == 0:
        raise ValueError(f"expected attentions [..., T, S] with S >= 1, got shape {a.shape}")
    dtype = np.float16 if a.dtype == np.float16 else np.float32
    out = np.empty(a.shape, dtype=dtype)
    flat_in, flat_out = a.reshape(-1, *a.shape[-2:]), out.reshape(-1, *a.shape[-2:])
    for k, matrix in enumerate(flat_in):
        rest = np.asarray(matrix, dtype=np.float32).copy()
        rest[:, 0] = 0.0
        totals = rest.sum(axis=-1, keepdims=True)
        flat_out[k] = np.divide(rest, totals, out=np.zeros_like(rest), where=totals > 0)
    return out


def first_aside_positions(trace: AttentionTrace, hide_special: bool = False) -> AttentionTrace:
    """`trace` with position 0 marked special (so a token view that hides special tokens drops its row and
    column; the real special tokens stay marked only when `hide_special`) and belonging to no word (so the
    word view pools the other tokens only). The attentions are the trace's own: this gives the positions
    and labels of a set-aside view (`analysis.sentence_pairs.view_sequence`) without computing it."""
    if not trace.tokens:
        raise ValueError("the trace has no tokens")
    marks = trace.special_mask if len(trace.special_mask) == len(trace.tokens) else [False] * len(trace.tokens)
    special = [i == 0 or (hide_special and bool(s)) for i, s in enumerate(marks)]
    return dataclasses.replace(trace, special_mask=special, word_of_token=[None, *trace.word_of_token[1:]])


def trace_first_aside(trace: AttentionTrace, hide_special: bool = False) -> AttentionTrace:
    """A copy of `trace` with the first token set aside: attentions renormalised without position 0
    (`first_token_aside`), positions as `first_aside_positions`. The input is not changed; the token view
    of the result hides its special tokens (`attention_view(result, "token", True)`)."""
    return dataclasses.replace(first_aside_positions(trace, hide_special),
                               attentions=first_token_aside(trace.attentions))
