"""Do query heads that share keys and values attend alike?

In GQA/MQA the heads of one KV group read the same keys; only their queries differ. If sharing K/V made
heads redundant, the attention maps of heads within a group would be closer to each other than to heads
of other groups. This module measures that on plain arrays: `attentions` [L, H, T, S] (query heads, KV
already expanded, as `AttentionTrace.attentions`) and `kv_group` (the KV head each query head reads).

Distance between two attention rows: the Jensen-Shannon distance with base-2 logarithms,
sqrt(JSD(p, q)), a metric in [0, 1] (0: the same distribution; 1: disjoint supports) (Lin 1991;
Endres & Schindelin 2003). Two heads' distance is its mean over the query rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np


def js_distance(p: np.ndarray, q: np.ndarray, axis: int = -1) -> np.ndarray:
    """Jensen-Shannon distance along `axis`: sqrt(0.5 KL(p||m) + 0.5 KL(q||m)), m = (p + q) / 2, log base 2.

    Inputs are non-negative weights; each is normalised to sum 1 along `axis` first (attentions kept as
    float16 sum to 1 only within its rounding). Terms with p = 0 contribute 0 (the limit of p log p).
    Computed in float64; the divergence is clipped to [0, 1] against rounding before the square root.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have one shape, got {p.shape} and {q.shape}")
    if (p < 0).any() or (q < 0).any() or not (np.isfinite(p).all() and np.isfinite(q).all()):
        raise ValueError("distributions must be finite and non-negative")
    p_sum, q_sum = p.sum(axis=axis, keepdims=True), q.sum(axis=axis, keepdims=True)
    if (p_sum == 0).any() or (q_sum == 0).any():
        raise ValueError("a distribution sums to 0")
    p, q = p / p_sum, q / q_sum
    m = (p + q) / 2
    divergence = 0.5 * (_kl_to(p, m, axis) + _kl_to(q, m, axis))
    return np.sqrt(np.clip(divergence, 0.0, 1.0))


def _kl_to(p: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    """KL(p || m) in bits; m > 0 wherever p > 0, since m = (p + q) / 2."""
    ratio = np.divide(p, m, out=np.ones_like(p), where=p > 0)
    return (p * np.log2(ratio)).sum(axis=axis)


def head_distances(attentions: np.ndarray, rows=None) -> np.ndarray:
    """[H, H] mean JS distance between every two heads' rows of one layer's attentions [H, T, S].

    `rows`: the query rows to average over (indices or a boolean mask over T); default all. A causal
    model's first row has one key only, so every head puts all its weight there: pass rows 1.. to
    leave it out."""
    a = np.asarray(attentions)
    if a.ndim != 3:
        raise ValueError(f"attentions must be [H, T, S], got shape {a.shape}")
    if rows is not None:
        a = a[:, rows]
    if a.shape[1] == 0:
        raise ValueError("no query rows to compare")
    n = a.shape[0]
    out = np.zeros((n, n))
    for i, j in combinations(range(n), 2):
        out[i, j] = out[j, i] = js_distance(a[i], a[j]).mean()
    return out


@dataclass(frozen=True)
class GroupDistances:
    """Per layer: mean head-pair distance within KV groups and across them (NaN where there are no
    such pairs: MHA has no pair within a group, MQA none across), and a permutation p-value: the share
    of random regroupings of the heads (same group sizes) whose within-group mean is at most the
    observed one (small = heads sharing K/V are closer than chance would make them)."""

    within: np.ndarray  # L
    across: np.ndarray  # L
    p_value: np.ndarray  # L (NaN when within or across is undefined)
    n_within_pairs: int
    n_across_pairs: int
    permutations: int


def group_distances(attentions: np.ndarray, kv_group, rows=None, permutations: int = 999,
                    seed: int = 0) -> GroupDistances:
    """Within- against across-group head distances for every layer of attentions [L, H, T, S]."""
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [L, H, T, S], got shape {a.shape}")
    groups = np.asarray(kv_group)
    if groups.shape != (a.shape[1],):
        raise ValueError(f"kv_group must name one KV head per query head ({a.shape[1]}), got {list(kv_group)}")
    if permutations < 0:
        raise ValueError(f"permutations must be >= 0, got {permutations}")
    upper = np.triu_indices(len(groups), k=1)
    same = (groups[:, None] == groups[None, :])[upper]
    rng = np.random.default_rng(seed)
    shuffles = [rng.permutation(groups) for _ in range(permutations)]
    shuffled_same = [(g[:, None] == g[None, :])[upper] for g in shuffles]
    within, across, p_value = [], [], []
    for layer in a:
        pairs = head_distances(layer, rows)[upper]
        w = pairs[same].mean() if same.any() else np.nan
        c = pairs[~same].mean() if (~same).any() else np.nan
        within.append(w)
        across.append(c)
        if np.isnan(w) or np.isnan(c) or not permutations:
            p_value.append(np.nan)
        else:
            # a small tolerance: a regrouping equal to the observed one must count as "at most" it
            at_most = sum(pairs[s].mean() <= w + 1e-12 for s in shuffled_same)
            p_value.append((1 + at_most) / (1 + permutations))
    return GroupDistances(np.array(within), np.array(across), np.array(p_value), int(same.sum()),
                          int((~same).sum()), permutations)
