"""A long text's views one head at a time, over a window (docs/performance.md, "Long contexts").

A reduced trace (attnviz.trace.ReducedTrace) holds no [L, H, T, T] map; the head detail draws one head over a
window of the view's positions. `view_positions` says which tokens each position of a view stands for (one token
in the token view, a word's tokens in the word view) and over which columns rows are renormalised (special tokens
hidden, the first token set aside); `head_window_view` recomputes the window's token rows over every key from the
kept queries and keys and pools them exactly as analysis.views.attention_view and analysis.sink.trace_first_aside
do for a full trace, so the window equals the full view's slice."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.analysis.profile import special_tokens
from attnviz.analysis.sink import first_aside_positions
from attnviz.analysis.views import token_labels
from attnviz.trace import ReducedTrace


@dataclass(frozen=True)
class ViewPositions:
    """The positions of one view of a trace: `labels[i]` names position i, `members[i]` are its tokens, and
    `norm_cols` [T] bool the columns each row is renormalised over first (None: rows are not renormalised)."""

    labels: list[str]
    members: list[np.ndarray]
    norm_cols: np.ndarray | None
    level: str


def view_positions(trace, level: str = "token", hide_special: bool = False,
                   first_aside: bool = False) -> ViewPositions:
    """The positions of attention_view(level, hide_special), or of the view with the first token set aside
    (workbench.views.aside_view), for any trace with token fields (full or reduced)."""
    n = len(trace.tokens)
    positions = first_aside_positions(trace, hide_special) if first_aside else trace
    if level == "word":
        kept = sorted({w for w in positions.word_of_token if w is not None})
        of_token = np.asarray([-1 if w is None else w for w in positions.word_of_token])
        members = [np.flatnonzero(of_token == w) for w in kept]
        norm = None
        if first_aside:  # rows renormalised over every column but the first, words or not
            norm = np.ones(n, dtype=bool)
            norm[0] = False
        return ViewPositions([trace.words[w] for w in kept], members, norm, "word")
    if level != "token":
        raise ValueError(f"level must be 'token' or 'word', got {level!r}")
    labels = token_labels(positions)
    hidden = special_tokens(positions) if (hide_special or first_aside) else np.zeros(n, dtype=bool)
    keep = np.flatnonzero(~hidden)
    if keep.size == 0:
        raise ValueError("the input has only special tokens")
    norm = ~hidden if hidden.any() else None
    return ViewPositions([labels[i] for i in keep], [np.array([i]) for i in keep], norm, "token")


def head_window_view(trace: ReducedTrace, layer: int, head: int, positions: ViewPositions,
                     window: slice) -> np.ndarray:
    """float32 [R, C]: head `head` of layer `layer` in the view `positions`, rows and columns `window` of the
    view's positions. Each row token's probabilities are recomputed over every key it sees (the denominator),
    renormalised over `positions.norm_cols` where the view does so, then a row position takes the mean over its
    tokens of the sum over the column position's tokens (the word rule; one token each in the token view)."""
    shown = positions.members[window]
    if not shown:
        return np.zeros((0, 0), dtype=np.float32)
    row_tokens = np.unique(np.concatenate(shown))
    probabilities = trace.head_window(layer, head, row_tokens).astype(np.float64)  # R_tokens, S
    if positions.norm_cols is not None:
        kept = np.where(positions.norm_cols[None, :], probabilities, 0.0)
        totals = kept.sum(axis=-1, keepdims=True)
        # A row whose whole weight was on the columns set aside has nothing left to share: it stays 0.
        probabilities = np.divide(kept, totals, out=np.zeros_like(kept), where=totals > 0)
    where = {int(token): k for k, token in enumerate(row_tokens)}
    rows = np.zeros((len(shown), row_tokens.size))  # the mean over a position's tokens
    cols = np.zeros((probabilities.shape[1], len(shown)))  # the sum over a position's tokens
    for i, tokens in enumerate(shown):
        rows[i, [where[int(t)] for t in tokens]] = 1.0 / len(tokens)
        cols[tokens, i] = 1.0
    return (rows @ probabilities @ cols).astype(np.float32)
