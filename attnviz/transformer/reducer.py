"""A record that reduces each layer's attention probabilities as the forward pass runs, never holding them: a
`Reducer` passed as `record=` to Transformer.forward.

A full trace holds [L, H, T, T] probabilities: 18 GB in float32 for SmolLM2 at 4,096 tokens, where what is read
from them often needs far less (a sum a head, say). The Reducer's layer records name the "rows" kernel
(attention.row_blocks), which computes scores and softmax one block of query rows at a time, over the keys that
block may see (a causal block none after its last row), and hands each block to `reduce`, on the device where the
layer runs. The Reducer passes the block to each `Reduction` it was given, in their order, and drops it; the
transient is one block, [B, H, R, C]. It also keeps each layer's queries and keys (float16 by default) so that
one head's map over a window of rows can be recomputed exactly (attnviz.trace.ReducedTrace.head_window).

What to reduce is the caller's: this layer knows no view (the app's reductions are attnviz.models.view_reductions).

Shape legend: L layers, H query heads, K key/value heads, T query positions, S key positions (S = T: one
sequence attending to itself), D head dim, R rows of a block, C its columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from attnviz.memory.ceiling import kept as held

# The query rows of a block (attention.block_rows takes fewer where a block of long rows would not stay in cache).
CHUNK_ROWS = 256


@dataclass
class Block:
    """One block of one layer's probabilities as the reductions see it: the batch's one sequence, float32."""

    # H, R, C: rows r0 .. r0 + R, columns c0 .. c0 + C. Read only: the kernel makes the context from them after.
    # A new tensor for each block that the kernel never writes again, so a reduction may hold it past `add`.
    probs: torch.Tensor
    r0: int
    c0: int
    # H, R, C: the scores `probs` are the softmax of (mask included), or None. The kernel does not read them
    # again, so a reduction may overwrite them in place: at most one reduction of a Reducer should read them.
    scores: torch.Tensor | None = None
    # What one reduction made of this block that another may reuse (each row's maximum, say), by names the
    # reductions agree on; dropped with the block.
    shared: dict[str, Any] = field(default_factory=dict)

    def share(self, name: str, make: Callable[[], Any]) -> Any:
        """`shared[name]`, made by `make()` for the first reduction that asks."""
        if name not in self.shared:
            self.shared[name] = make()
        return self.shared[name]


class Reduction(Protocol):
    """What a Reducer runs on every block of every layer. Each layer's accumulators stay on its device until
    `result`."""

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        """Before layer `layer`'s first block: make (or remake) its accumulators on `device`, for H = `n_heads`
        heads and T = `n_rows` query rows (as many key columns)."""

    def add(self, layer: int, block: Block) -> None:
        """Add one block of layer `layer` to its accumulators."""

    def result(self) -> Any:
        """What was reduced, numpy on the CPU (the layers stacked first: [L, ...]), once the pass is done."""


class Reducer:
    """A record (attnviz.transformer.record's interface) for one sequence of `n_tokens` positions (batch 1):
    each layer's probabilities go block by block to `reductions`, and queries and keys are kept in `keep_dtype`.
    `chunk_rows`: the query rows of a block; `progress(layer, n_layers)` is called as each layer's last block
    is reduced.

    >>> reducer = Reducer({"sums": HeadSums()}, n_tokens=T)
    >>> module(ids, record=reducer); result = reducer.result()  # {"sums": ..., "queries": ..., "keys": ...}
    """

    names = frozenset({"queries", "keys"})

    def __init__(self, reductions: dict[str, Reduction], n_tokens: int, chunk_rows: int = CHUNK_ROWS,
                 keep_dtype: torch.dtype = torch.float16, progress=None, keep: bool = True) -> None:
        """`keep`: keep the queries and keys (False: a caller that needs only its reductions, such as the atlas,
        saves their copies; `result` then has no "queries" and "keys")."""
        taken = sorted(self.names & set(reductions))
        if taken:
            raise ValueError(f"{taken}: names of what a Reducer keeps itself, not of a reduction")
        self.reductions, self.n_tokens, self.keeps = dict(reductions), n_tokens, keep
        self.rows, self.keep_dtype, self.progress = chunk_rows, keep_dtype, progress
        self.begin(0)

    def begin(self, n_layers: int) -> None:
        """Called by the model before its first layer."""
        self.n_layers = n_layers
        self.started: set[int] = set()  # the layers whose reductions have started
        # "queries" [L, H, T, D], "keys" [L, K, S, D] on the CPU in keep_dtype, made at the first layer's and
        # filled a layer at a time: a stack at the end would hold them twice (160 MB more at 3,100 SmolLM2 tokens)
        self.kept: dict[str, torch.Tensor] = {}

    def at(self, layer: int) -> _LayerReducer:
        return _LayerReducer(self, layer)

    def reduce(self, layer: int, probs: torch.Tensor, r0: int, c0: int, scores: torch.Tensor | None = None) -> None:
        """Hand one block, probabilities [1, H, R, C] of rows r0.. and columns c0.. of layer `layer`, and the
        scores they are the softmax of (which a reduction may overwrite), to every reduction."""
        if probs.shape[0] != 1:
            raise ValueError(f"a Reducer takes one sequence, got a batch of {probs.shape[0]}")
        block = Block(probs[0].float(), r0, c0, None if scores is None else scores[0])
        if layer not in self.started:
            self.started.add(layer)
            for reduction in self.reductions.values():
                reduction.start(layer, block.probs.shape[0], self.n_tokens, block.probs.device)
        for reduction in self.reductions.values():
            reduction.add(layer, block)
        if r0 + block.probs.shape[1] == self.n_tokens and self.progress is not None:
            self.progress(layer, self.n_layers)

    def result(self) -> dict:
        """Each reduction's result under its name, and "queries" [L, H, T, D] and "keys" [L, K, S, D] (numpy,
        in `keep_dtype`)."""
        results = {name: reduction.result() for name, reduction in self.reductions.items()}
        if not self.keeps:
            return results
        return results | {"queries": self.kept["queries"].numpy(), "keys": self.kept["keys"].numpy()}


class _LayerReducer:
    """What one layer's attention reports to: LayerRecord's `wants` and `keep`, and the "rows" kernel
    (attnviz.transformer.attention.row_blocks), which hands `reduce` blocks of `rows` query rows."""

    kernel = "rows"

    def __init__(self, reducer: Reducer, layer: int) -> None:
        self.reducer, self.layer = reducer, layer

    def wants(self, name: str) -> bool:
        return self.reducer.keeps and name in Reducer.names

    def keep(self, name: str, tensor: torch.Tensor) -> None:
        if not self.wants(name):
            return
        kept = self.reducer.kept
        if name not in kept:  # batch 1: [H or K, T, D] a layer
            shape, dtype = (self.reducer.n_layers, *tensor.shape[1:]), self.reducer.keep_dtype
            kept[name] = held(dtype.itemsize * math.prod(shape), f"the kept {name}",
                              lambda: torch.empty(shape, dtype=dtype))
        kept[name][self.layer].copy_(tensor[0])  # rounded to keep_dtype (and brought to the CPU) in the copy

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        self.keep(name, tensor)
        return tensor

    @property
    def rows(self) -> int:
        return self.reducer.rows

    def reduce(self, probs: torch.Tensor, r0: int, c0: int, scores: torch.Tensor | None = None) -> None:
        self.reducer.reduce(self.layer, probs, r0, c0, scores)
