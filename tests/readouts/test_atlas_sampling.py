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


def kept_sets(sampler: Samplers) -> dict:
    return {slot: sorted(e.sequence_id for e in examples) for slot, examples in sampler.kept.items() if examples}


def test_the_sample_is_a_function_of_the_sequences_not_of_their_order():
    """Bottom-k priorities below, the largest max on top (ties: the smaller id): the same set offered in any
    order keeps the same sequences (what lets Ray shards and a resumed build give the one-process sample)."""
    rng = np.random.default_rng(1)
    maxes = np.round(rng.random((300, L, H)), 1).astype(np.float32)
    boundaries = np.sort(rng.random((L, H, 4)), -1)
    samples = []
    for order in (np.arange(300), rng.permutation(300), rng.permutation(300)):
        sampler = Samplers.for_shard(Samplers(L, H, warmup=0, per_interval=2, per_top=3).settings(), boundaries)
        for sequence_id in order:
            sampler.add(int(sequence_id), offered(maxes[sequence_id], np.ones((L, H), bool)))
        samples.append(kept_sets(sampler))
    assert samples[0] == samples[1] == samples[2]
    # nearly every slot full (an interval between two boundaries that no max of 0.1 steps falls in stays empty)
    assert sum(len(ids) for ids in samples[0].values()) > 0.8 * L * H * (4 * 2 + 3)


def test_a_shards_sampler_asks_for_every_row_the_corpus_sampler_keeps():
    """Three shards of one stream, each with its own sampler over its texts in order (a Ray worker's): what a
    shard's sampler keeps ahead includes what the corpus's sampler keeps, so the corpus's sample, fed only the
    rows the shards took, never misses a row (coo raises if it does) and equals the sample fed every row."""
    rng = np.random.default_rng(2)
    n, warmup = 500, 20
    maxes = np.round(rng.random((n, L, H)), 1).astype(np.float32)
    shard_of = rng.integers(0, 3, n)
    settings = dict(warmup=warmup, per_interval=2, per_top=3)
    corpus, every_row = Samplers(L, H, **settings), Samplers(L, H, **settings)
    shards: dict[int, Samplers] = {}
    taken = 0
    for sequence_id in range(n):
        if corpus.boundaries is None:
            rows = np.ones((L, H), bool)  # sent before the boundaries were known: every head's rows
        else:
            shard = shards.setdefault(int(shard_of[sequence_id]), Samplers.for_shard(corpus.settings(),
                                                                                      corpus.boundaries))
            ask = shard.keeps(sequence_id)
            rows = np.stack([ask(layer, maxes[sequence_id, layer]) for layer in range(L)])
            shard.add(sequence_id, offered(maxes[sequence_id], rows))
            taken += int(rows.sum())
        corpus.add(sequence_id, offered(maxes[sequence_id], rows).compacted())
        every_row.add(sequence_id, offered(maxes[sequence_id], np.ones((L, H), bool)))
    assert kept_sets(corpus) == kept_sets(every_row)
    assert taken < (n - warmup) * L * H / 4  # the shards took few rows: most sequences are kept by no head
