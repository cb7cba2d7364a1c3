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


def test_a_layer_in_many_blocks_waits_for_its_max_and_takes_the_kept_heads_rows():
    """A pass whose layers run in blocks of 4 rows holds them until the layer's max is final, asks the predicate
    once a layer with the max of the whole layer, and takes the top-k rows of exactly the heads it names: equal to
    the same pass in one block a layer (tiny Llama with GQA, 23 tokens)."""
    import torch

    from attnviz.readouts.atlas_examples import sequence_measures
    from tests.helpers.tiny_hf import tiny

    module = tiny("llama")
    ids = torch.randint(3, 30, (23,), generator=torch.Generator().manual_seed(0)).tolist()  # repeats: induction
    asked = {}

    def keeps(layer, maxes):  # the heads whose max is above the layer's median
        asked.setdefault(layer, []).append(np.array(maxes))
        return maxes > np.median(maxes)

    _, whole = sequence_measures(module, ids, chunk_rows=23, keeps=keeps)
    one_block, asked = dict(asked), {}
    _, blocked = sequence_measures(module, ids, chunk_rows=4, keeps=keeps)
    assert all(len(maxes) == 1 for maxes in asked.values()) and asked.keys() == one_block.keys()
    for layer in asked:
        np.testing.assert_allclose(asked[layer][0], one_block[layer][0], rtol=0, atol=1e-6)  # the layer's max
    assert (blocked.has_rows == whole.has_rows).all() and whole.has_rows.any() and not whole.has_rows.all()
    for layer, head in np.argwhere(whole.has_rows):
        for got, want in zip(blocked.coo(layer, head), whole.coo(layer, head)):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
