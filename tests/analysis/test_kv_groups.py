"""attnviz/analysis/kv_groups.py: the Jensen-Shannon distance against hand computations, and the
within/across KV-group head distances against plain loops and constructed cases; one real GQA model."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from attnviz.analysis.kv_groups import group_distances, head_distances, js_distance


def test_js_distance_by_hand():
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4)
    # KL(p||m) = 1/2 log2(2/3) + 1/2 log2(2) ; KL(q||m) = log2(4/3)
    kl_p = 0.5 * math.log2((1 / 2) / (3 / 4)) + 0.5 * math.log2((1 / 2) / (1 / 4))
    kl_q = 1.0 * math.log2(1 / (3 / 4))
    expected = math.sqrt(0.5 * kl_p + 0.5 * kl_q)
    assert expected == pytest.approx(0.5579230, abs=1e-7)  # the same number worked on paper
    assert js_distance([0.5, 0.5], [1.0, 0.0]) == pytest.approx(expected, abs=1e-12)
    assert js_distance([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)  # disjoint supports: the maximum
    assert js_distance([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == 0.0


def test_js_distance_is_a_bounded_symmetric_metric():
    rng = np.random.default_rng(0)
    p, q, r = (rng.dirichlet(np.full(7, 0.3), size=200) for _ in range(3))
    d_pq, d_qr, d_pr = js_distance(p, q), js_distance(q, r), js_distance(p, r)
    assert d_pq.shape == (200,)
    assert np.allclose(d_pq, js_distance(q, p))
    assert (d_pq >= 0).all() and (d_pq <= 1).all()
    assert (d_pr <= d_pq + d_qr + 1e-12).all()  # triangle inequality (sqrt of JSD is a metric)
    # unnormalised weights are normalised first; a zero row or a negative weight is refused
    assert js_distance(p[0] * 3, q[0]) == pytest.approx(d_pq[0])
    with pytest.raises(ValueError):
        js_distance([0.0, 0.0], [0.5, 0.5])
    with pytest.raises(ValueError):
        js_distance([-0.1, 1.1], [0.5, 0.5])


def rows(rng, h, t):
    a = rng.random((h, t, t)) ** 4
    return a / a.sum(-1, keepdims=True)


def test_head_distances_against_a_loop_and_row_selection():
    rng = np.random.default_rng(1)
    a = rows(rng, 4, 5)
    d = head_distances(a)
    for i, j in combinations(range(4), 2):
        by_loop = np.mean([js_distance(a[i, r], a[j, r]) for r in range(5)])
        assert d[i, j] == pytest.approx(by_loop) and d[j, i] == d[i, j]
    assert np.all(np.diag(d) == 0)
    d_tail = head_distances(a, rows=slice(1, None))
    assert d_tail[0, 1] == pytest.approx(np.mean([js_distance(a[0, r], a[1, r]) for r in range(1, 5)]))


def test_within_and_across_groups_on_constructed_heads():
    """Nine heads in three KV groups of three; heads of a group are copies of one pattern plus a little
    noise, so within-group distances are small, across-group large, and only regroupings equal to the true one
    match it (p near its floor)."""
    rng = np.random.default_rng(2)
    patterns = rows(rng, 3, 6)
    heads = []
    for g in range(3):
        for _ in range(3):
            noisy = patterns[g] + 0.01 * rng.random((6, 6))
            heads.append(noisy / noisy.sum(-1, keepdims=True))
    a = np.stack([np.stack(heads), np.stack(heads)[::-1]])  # 2 layers; layer 1 with heads reversed
    groups = [h // 3 for h in range(9)]
    result = group_distances(a, groups, permutations=500)
    d = head_distances(a[0])
    same = [(i, j) for i, j in combinations(range(9), 2) if groups[i] == groups[j]]
    other = [(i, j) for i, j in combinations(range(9), 2) if groups[i] != groups[j]]
    assert (result.n_within_pairs, result.n_across_pairs) == (9, 27)
    assert result.within[0] == pytest.approx(np.mean([d[p] for p in same]))
    assert result.across[0] == pytest.approx(np.mean([d[p] for p in other]))
    assert result.within[0] < 0.1 < result.across[0]
    # a shuffle reproduces the true partition with probability 1/280 (9! / (3!^3 3!) partitions): p is
    # (1 + those) / 501, near 1/280 + 1/501, far below an unrelated grouping's
    assert result.p_value[0] < 0.02
    # reversing the heads maps groups onto groups (8,7,6 | 5,4,3 | 2,1,0): the same answer
    assert result.within[1] == pytest.approx(result.within[0])


def test_unrelated_grouping_is_not_significant():
    rng = np.random.default_rng(3)
    a = rows(rng, 9, 6)[None]
    result = group_distances(a, [h // 3 for h in range(9)], permutations=300)
    assert result.p_value[0] > 0.05
    assert abs(result.within[0] - result.across[0]) < 0.1


def test_mha_and_mqa_have_no_pairs_on_one_side():
    a = rows(np.random.default_rng(4), 4, 3)[None]
    mha = group_distances(a, [0, 1, 2, 3])
    mqa = group_distances(a, [0, 0, 0, 0])
    assert np.isnan(mha.within[0]) and not np.isnan(mha.across[0]) and np.isnan(mha.p_value[0])
    assert np.isnan(mqa.across[0]) and not np.isnan(mqa.within[0])
    with pytest.raises(ValueError, match="kv_group"):
        group_distances(a, [0, 0, 1])


def test_smollm2_heads_within_kv_groups(smollm):
    """SmolLM2 (9 query heads, 3 KV heads): the distances are real numbers in [0, 1] for every layer.
    No direction is asserted: whether sharing K/V makes heads alike is what the page lets people see."""
    trace = smollm.run("The keys to the cabinet are on the table because Mary put them there.")
    assert trace.kv_group == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    result = group_distances(trace.attentions, trace.kv_group, rows=slice(1, None), permutations=99)
    assert result.within.shape == (30,) and result.across.shape == (30,)
    assert ((result.within > 0) & (result.within < 1)).all() and ((result.across > 0) & (result.across < 1)).all()
