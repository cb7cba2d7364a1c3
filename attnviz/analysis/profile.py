"""Surface statistics of every head of a trace (Clark et al. 2019 sec. 3; Voita et al. 2019 sec. 4).

Each statistic is an [L, H] array, averaged over the query rows of the trace (all rows, specials
included, as Clark et al. do). Definitions:
- entropy: -sum_j a_ij log a_ij in nats (0 log 0 = 0); a row with one visible key has entropy 0.
- mean_distance: sum_j a_ij |i - j|, in tokens.
- special / first / punctuation: the row's attention mass on special tokens, on token 0, on
  punctuation tokens (label non-empty after stripping whitespace and every character punctuation;
  specials never count).
- previous / next: a_{i,i-1} averaged over the rows that have a previous token (i >= 1), a_{i,i+1}
  over the rows that have a next one (NaN for a one-token trace); self: a_ii.
- confidence: the row maximum (Voita et al.).
- sink_mass: the learned-sink mass, 1 - sum_j a_ij: what a row gives to gpt-oss's learned per-head sink
  logit (a softmax term with no key) instead of to any token; 0 up to rounding for every other model.
  Not the first-token share (`first`), which is weight on a real token.
- positional: the most common argmax offset k = argmax_j a_ij - i covers >= 90% of the rows where
  offset k exists (0 <= i + k < S), and at least two such rows. `positional_offset` and
  `positional_share` are reported for every head; the flag says whether the share passes.
Special tokens are `trace.special_mask`; a trace without one falls back to `sequence_ids is None`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from attnviz.analysis.scoring import self_attentions
from attnviz.trace import AttentionTrace, ReducedTrace, punctuation_token_mask, special_token_mask

POSITIONAL_SHARE = 0.9


@dataclass
class HeadProfile:
    """Arrays [L, H], one per statistic (see the module docstring)."""

    entropy: np.ndarray
    mean_distance: np.ndarray
    special: np.ndarray
    first: np.ndarray
    punctuation: np.ndarray
    previous: np.ndarray
    next: np.ndarray
    self: np.ndarray
    confidence: np.ndarray
    sink_mass: np.ndarray
    positional: np.ndarray  # bool
    positional_offset: np.ndarray  # int
    positional_share: np.ndarray

    def head(self, layer: int, head: int) -> dict[str, float | int | bool]:
        """The statistics of one head as plain Python values."""
        return {f.name: getattr(self, f.name)[layer, head].item() for f in fields(self)}


def special_tokens(trace) -> np.ndarray:
    """[T] bool: `trace.special_mask`, or tokens outside both sentences when it is empty."""
    return special_token_mask(trace.special_mask, trace.sequence_ids)


def punctuation_tokens(trace) -> np.ndarray:
    """[T] bool: non-special tokens whose label is all punctuation (whitespace ignored)."""
    return punctuation_token_mask(trace.tokens, special_tokens(trace))


def _positional(attentions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _positional_from_argmax(attentions.argmax(axis=-1), attentions.shape[-1])


def _positional_from_argmax(argmax: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The positional flag, offset and share from each row's argmax key [L, H, T]."""
    n_layers, n_heads, n_rows = argmax.shape
    span = n_rows + n_keys - 1  # offsets -(T-1) .. S-1, offset k stored at k + T - 1
    offsets = argmax.astype(np.int64) - np.arange(n_rows)  # [L, H, T]
    bins = (offsets + n_rows - 1).reshape(n_layers * n_heads, n_rows)
    bins = bins + span * np.arange(n_layers * n_heads)[:, None]
    counts = np.bincount(bins.ravel(), minlength=n_layers * n_heads * span).reshape(n_layers, n_heads, span)
    best = counts.argmax(axis=-1)  # [L, H]; first on ties, i.e. the most negative offset
    offset = best - (n_rows - 1)
    rows = np.arange(n_rows)
    reach = rows + offset[..., None]  # [L, H, T]
    possible = ((reach >= 0) & (reach < n_keys)).sum(axis=-1)  # rows where offset k exists
    share = np.take_along_axis(counts, best[..., None], axis=-1)[..., 0] / np.maximum(possible, 1)
    flag = (share >= POSITIONAL_SHARE) & (possible >= 2)
    return flag, offset.astype(np.int64), share


def _profile(attentions: np.ndarray, special: np.ndarray, punctuation: np.ndarray) -> HeadProfile:
    attentions = np.asarray(attentions, dtype=np.float64)  # [L, H, T, T], checked by self_attentions
    n_rows = attentions.shape[2]
    if n_rows == 0:
        raise ValueError("the trace has no tokens")
    rows = np.arange(n_rows)
    distance = np.abs(rows[:, None] - rows[None, :])  # [T, T]
    logs = np.log(np.where(attentions > 0, attentions, 1.0))
    previous = attentions[..., rows[1:], rows[1:] - 1]  # [L, H, T - 1]
    following = attentions[..., rows[:-1], rows[:-1] + 1]  # [L, H, T - 1]
    flag, offset, share = _positional(attentions)
    nan = np.full(attentions.shape[:2], np.nan)
    return HeadProfile(
        entropy=-(attentions * logs).sum(-1).mean(-1),
        mean_distance=(attentions * distance).sum(-1).mean(-1),
        special=attentions[..., special].sum(-1).mean(-1),
        first=attentions[..., 0].mean(-1),
        punctuation=attentions[..., punctuation].sum(-1).mean(-1),
        previous=previous.mean(-1) if n_rows > 1 else nan,
        next=following.mean(-1) if n_rows > 1 else nan,
        self=attentions[..., rows, rows].mean(-1),
        confidence=attentions.max(-1).mean(-1),
        sink_mass=np.clip(1.0 - attentions.sum(-1), 0.0, None).mean(-1),
        positional=flag,
        positional_offset=offset,
        positional_share=share,
    )


def profile_heads(trace: AttentionTrace) -> HeadProfile:
    """The profile of every head of a self-attention trace."""
    return _profile(self_attentions(trace), special_tokens(trace), punctuation_tokens(trace))


def profile_reduced(trace: ReducedTrace) -> HeadProfile:
    """The profile of every head of a reduced trace (a long text's), from the sums the forward pass kept:
    the same numbers as `profile_heads` of the full trace, up to float32 rounding."""
    flag, offset, share = _positional_from_argmax(trace.argmax, trace.keys.shape[2])
    return HeadProfile(**{name: trace.statistics[name] for name in _STATISTICS}, positional=flag,
                       positional_offset=offset, positional_share=share)


_STATISTICS = ("entropy", "mean_distance", "special", "first", "punctuation", "previous", "next", "self",
               "confidence", "sink_mass")


def has_learned_sinks(trace: AttentionTrace) -> bool:
    """Whether the model's rows may sum to less than 1 (a layer kind with learned sinks)."""
    return any("sinks" in kind for kind in trace.metadata.get("layer_kinds", []))


def profile_head(trace: AttentionTrace, layer: int, head: int) -> dict[str, float | int | bool]:
    """The statistics of one head, computed from that head's attention only."""
    attentions = self_attentions(trace)
    if not (0 <= layer < attentions.shape[0] and 0 <= head < attentions.shape[1]):
        raise ValueError(f"no head ({layer}, {head}) in attentions of shape {attentions.shape}")
    attentions = attentions[layer : layer + 1, head : head + 1]  # [1, 1, T, T]
    return _profile(attentions, special_tokens(trace), punctuation_tokens(trace)).head(0, 0)


def profile_map(trace: AttentionTrace, matrix: np.ndarray) -> dict[str, float | int | bool]:
    """The statistics of one token-level map [T, T] over the trace's tokens that is not a raw head: a lens's
    map (value-weighted, or the one rollout or flow map of a layer), so a profile describes the map drawn."""
    m = np.asarray(matrix)
    n = len(trace.offsets)
    if m.shape != (n, n):
        raise ValueError(f"expected a [{n}, {n}] map over the trace's tokens, got shape {m.shape}")
    return _profile(m[None, None], special_tokens(trace), punctuation_tokens(trace)).head(0, 0)
