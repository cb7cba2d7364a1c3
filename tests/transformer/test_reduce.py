"""The Reducer's mechanism (attnviz.transformer.reducer), without any view: a record that hands each layer's
probabilities, block by block over the keys a block may see, to the reductions it is given, and keeps queries and
keys. The app's view reductions are checked against full maps in tests/models/test_reduced_pass.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.transformer.attention import visible_columns
from attnviz.transformer.masks import causal_mask
from attnviz.transformer.record import Recorder
from attnviz.transformer.reducer import Block, Reducer
from tests.helpers.tiny_hf import tiny

T, ROWS = 40, 8


class HeadMass:
    """A reduction of this test's own: each head's probabilities summed over rows and columns, float64 [L, H],
    and the blocks it was handed."""

    def __init__(self) -> None:
        self.layers: dict[int, torch.Tensor] = {}
        self.starts: list[tuple] = []
        self.blocks: list[tuple[int, int, int, int]] = []  # layer, r0, rows, c0

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        self.starts.append((layer, n_heads, n_rows, device.type))
        self.layers[layer] = torch.zeros(n_heads, dtype=torch.float64, device=device)

    def add(self, layer: int, block: Block) -> None:
        self.layers[layer] += block.probs.double().sum((-2, -1))
        self.blocks.append((layer, block.r0, block.probs.shape[1], block.c0))

    def result(self) -> np.ndarray:
        return np.stack([self.layers[layer].numpy() for layer in sorted(self.layers)])


def run(module, reducer, ids):
    with torch.no_grad():
        return module(ids, torch.ones_like(ids), torch.zeros_like(ids), with_logits=False, record=reducer)


def test_a_reducer_runs_the_reductions_it_is_given():
    """Each head's probabilities sum to one a row: T a head. The sums equal the full maps' (the blocks cover
    every probability the map holds), each layer starts once, and queries and keys are the recorder's (to the
rounding of a context made in blocks, in the layers after the first)."""
    module = tiny("mistral")  # a sliding window: blocks skip the keys no row of theirs may see
    ids = torch.randint(3, 99, (1, T), generator=torch.Generator().manual_seed(2))
    mass = HeadMass()
    reducer = Reducer({"mass": mass}, T, chunk_rows=ROWS, keep_dtype=torch.float32)
    out = run(module, reducer, ids)
    result = reducer.result()
    assert out.attentions is None and set(result) == {"mass", "queries", "keys"}
    n_layers, n_heads = module.config.n_layers, module.config.n_heads
    assert result["mass"].shape == (n_layers, n_heads)
    np.testing.assert_allclose(result["mass"], T, rtol=1e-6)
    recorder = Recorder("attentions", "queries", "keys")
    run(module, recorder, ids)
    full = recorder.stacked("attentions")[:, 0].double().sum((-2, -1)).numpy()  # L, H
    np.testing.assert_allclose(result["mass"], full, atol=1e-5)  # float32 blocks vs whole maps: rounding
    assert mass.starts == [(layer, n_heads, T, "cpu") for layer in range(n_layers)]
    assert [(r0, rows) for layer, r0, rows, _ in mass.blocks if layer == 0] == [(r0, ROWS) for r0 in range(0, T, ROWS)]
    assert any(c0 > 0 for _, _, _, c0 in mass.blocks)  # the window's first keys left out of later blocks
    for name in ("queries", "keys"):  # the first layer's exactly; later ones after blocks' rounding
        kept, recorded = result[name], recorder.stacked(name)[:, 0].numpy()
        np.testing.assert_array_equal(kept[0], recorded[0])
        np.testing.assert_allclose(kept, recorded, atol=1e-5)


def test_a_block_shares_what_one_reduction_made_with_the_next():
    block = Block(torch.rand(2, 3, 5), r0=0, c0=0)
    made = []
    first = block.share("row_max", lambda: made.append(1) or block.probs.amax(-1))
    assert block.share("row_max", lambda: made.append(2)) is first and made == [1]


def test_a_reduction_may_not_take_the_names_of_what_the_reducer_keeps():
    with pytest.raises(ValueError, match="queries"):
        Reducer({"queries": HeadMass()}, T)


def test_the_reducer_keeps_no_map_and_takes_one_sequence():
    module = tiny("llama")
    reducer = Reducer({"mass": HeadMass()}, T, chunk_rows=ROWS)
    seen = []
    reducer.progress = lambda layer, n: seen.append((layer, n))
    with torch.no_grad():
        out = module(torch.randint(3, 99, (1, T)), record=reducer)
    assert out.attentions is None and seen == [(0, 3), (1, 3), (2, 3)]
    assert reducer.result()["queries"].dtype == np.float16  # kept in float16 unless asked otherwise
    with pytest.raises(ValueError, match="one sequence"), torch.no_grad():
        module(torch.randint(3, 99, (2, T)), record=reducer)


def test_the_ordinary_path_is_untouched_and_blocks_skip_hidden_keys():
    mask = causal_mask(20, window=4)
    assert visible_columns(mask, 8, 16, 20) == (5, 16)  # the window's first key .. the block's last row
    assert visible_columns(causal_mask(20), 0, 8, 20) == (0, 8)
    assert visible_columns(None, 0, 8, 20) == (0, 20)
