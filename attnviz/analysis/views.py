"""What the Explore page draws: token- or word-level attention, optionally without special tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.analysis.profile import special_tokens
from attnviz.analysis.scoring import word_attention_matrix
from attnviz.trace import AttentionTrace


@dataclass(frozen=True)
class AttentionView:
    attentions: np.ndarray  # [L, H, R, C], in the trace's float dtype
    labels: list[str]  # one per row (== column) of the view
    level: str  # "token" or "word"


def attention_view(trace: AttentionTrace, level: str = "token", hide_special: bool = False) -> AttentionView:
    """Token-level: the trace's own attention. Word-level: the docs/architecture.md word attention (mean over the
    row word's tokens of the sum over the column word's tokens); special tokens belong to no word and
    drop out. hide_special (token level): drop [CLS]/[SEP]/BOS rows and columns and renormalise rows,
    so a row shows how the remaining weight is shared among real tokens.

    The view has the trace's float dtype (the app keeps float16 traces); arithmetic runs in float32 or
    float64 one layer at a time, so no full-size wide copy is made."""
    dtype = trace.attentions.dtype if trace.attentions.dtype in (np.float16, np.float32) else np.float32
    if level == "word":
        # Only words that kept a token: after truncation the rest of a long text has none, and a
        # words x words grid over all of them could need gigabytes.
        kept = sorted({w for w in trace.word_of_token if w is not None})
        index = {w: k for k, w in enumerate(kept)}
        word_of_token = [None if w is None else index[w] for w in trace.word_of_token]
        words = word_attention_matrix(trace.attentions, word_of_token, len(kept), dtype=dtype)
        return AttentionView(words, [trace.words[w] for w in kept], "word")
    if level != "token":
        raise ValueError(f"level must be 'token' or 'word', got {level!r}")
    attentions, labels = trace.attentions, list(trace.tokens)
    special = special_tokens(trace)
    if hide_special and special.any():
        keep = np.flatnonzero(~special)
        if keep.size == 0:
            raise ValueError("the input has only special tokens")
        renormalised = np.empty((*attentions.shape[:2], keep.size, keep.size), dtype=dtype)
        for layer, layer_attentions in enumerate(attentions):
            kept = np.asarray(layer_attentions[:, keep][:, :, keep], dtype=np.float32)
            totals = kept.sum(axis=-1, keepdims=True)
            # A row whose whole weight went to special tokens has nothing left to share: it stays 0.
            renormalised[layer] = np.divide(kept, totals, out=np.zeros_like(kept), where=totals > 0)
        attentions = renormalised
        labels = [labels[i] for i in keep]
    return AttentionView(np.asarray(attentions, dtype=dtype), labels, "token")
