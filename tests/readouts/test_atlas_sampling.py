"""The sampler's answer ahead of a pass (`Samplers.keeps`: which heads will keep the next sequence, so that only
those heads' top-k rows are taken) against what `Samplers.add` then does, over a stream long enough to fill every
top interval and reservoir, with ties in the max (the top interval's rule: the earlier sequence on a tie)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.readouts.atlas_examples import QK_DISTANCE_EDGES, Samplers, SequenceExamples

L, H, T = 3, 4, 6


def offered(maxes: np.ndarray, has_rows: np.ndarray) -> SequenceExamples:
    values = np.full((L, H, T, 2), 0.5, np.float32)
    columns = np.zeros((L, H, T, 2), np.int64)
    return SequenceExamples(maxes, values, columns, np.zeros((L, H, len(QK_DISTANCE_EDGES) - 1)), T,
                            has_rows=has_rows)


@pytest.mark.parametrize("n_intervals", [1, 5])
def test_the_heads_asked_ahead_are_the_heads_that_keep(n_intervals):
    rng = np.random.default_rng(0)
    sampler = Samplers(L, H, warmup=7, n_intervals=n_intervals, per_interval=2, per_top=3)
    kept_any = 0
    for sequence_id in range(400):
        maxes = np.round(rng.random((L, H)), 1).astype(np.float32)  # many ties
        ask = sampler.keeps(sequence_id)
        ahead = np.stack([ask(layer, maxes[layer]) for layer in range(L)])
        sampler.add(sequence_id, offered(maxes, ahead))  # a head kept but not asked for raises (its rows absent)
        kept = np.zeros((L, H), bool)
        for (layer, head, _), examples in sampler.kept.items():
            kept[layer, head] |= any(e.sequence_id == sequence_id for e in examples)
        assert (ahead == kept).all(), sequence_id
        kept_any += int(kept.any())
    assert 0 < kept_any < 400 - 7  # the warmup keeps none; later most sequences are kept by no head


def test_rows_not_taken_are_not_read():
    found = offered(np.ones((L, H), np.float32), np.zeros((L, H), bool))
    with pytest.raises(RuntimeError, match="L0H0's rows were not taken"):
        found.coo(0, 0)
