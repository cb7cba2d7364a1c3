"""Top examples of every head, as HeadVis samples them (Luger, Kamath et al., "Visualizing Attention Heads",
Anthropic 2026; its public pipeline, neuronpedia's `headvis/compute-head-metrics.py`, read for its data tree and
its sampling rule; none of its code is here).

Per sequence, one streaming pass (`AtlasExamples`, a Reduction of attnviz.transformer.reducer, alongside
`AtlasSums`) gives per head:

- `max`: the sequence's largest weight p[i, j] with i >= 1 and j >= 1 (position 0, BOS where there is one, left
  out as query and as key; 0 where nothing is left), a running max over the blocks;
- the sparse rows: for each query row the TOP_K largest weights (fewer where the row has fewer keys: a sequence
  shorter than TOP_K works) that are >= SPARSE_THRESHOLD, as COO (flat index i * T + j, value rounded to 4
  decimals), sorted by (i, j). A block holds some rows over some columns (a column no block holds has weight 0);
  the row kernel holds a row in one block, whose top-k is then the row's, and a block holding rows an earlier one
  held too (a row's columns split over blocks) has its top-k merged with the row's so far;
- `qk_mass`: the attention mass per |i - j| bin of QK_DISTANCE_EDGES, over the whole sequence.

Over the corpus, `Samplers` keeps per head HeadVis's sample: the first `warmup` sequences only fix the interval
boundaries (quantiles of their max), then each sequence goes to the interval its max falls in; the top interval
keeps the TOP_SAMPLES sequences of largest max (ties: the earlier sequence), each lower one a uniform sample of
SAMPLES_PER_INTERVAL. Every sequence also counts in a 50-bin histogram of its max and in the mean max.

The lower intervals' sample is a bottom-k sample, not HeadVis's Algorithm R: each sequence gets a priority, a hash
of (seed, layer, head, interval, sequence id), and an interval keeps the sequences of smallest priority. Both are a
uniform sample without replacement; this one is a function of the set of sequences offered, not of their order or
of a generator's state, so (like the top interval's heap) it is the same whatever shards the corpus is measured in
and however often a build is stopped and resumed: N Ray workers give the one-process sample exactly
(attnviz.readouts.atlas_ray), and a resumed build the uninterrupted one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

import numpy as np
import torch

from attnviz.readouts.atlas_metrics import (
    INDUCTION_THRESHOLD,
    AtlasSums,
    HeadSums,
    block_rows,
    diagonal_key,
    diagonal_sums,
)
from attnviz.readouts.atlas_store import insert_rows
from attnviz.transformer.reducer import Block, Reducer

TOP_K = 8  # HeadVis's --sparse-topk-per-row
SPARSE_THRESHOLD = 0.005  # HeadVis's --sparse-threshold
N_INTERVALS = 5
SAMPLES_PER_INTERVAL = 3
TOP_SAMPLES = 10
SEED = 0
MAX_BINS = 50  # the histogram of a head's max, over [0, 1]
QK_DISTANCE_EDGES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
WARMUP_MOST = 2000
# The most bytes of a layer's probabilities [H, T, T] whose blocks AtlasExamples holds until the layer's max is
# known, so that only the heads a sampler keeps get their top k (SmolLM2 at 512 tokens: at most 9.4 MB); above it,
# every head's top k is taken block by block.
WAIT_BYTES = 64 * 2**20


def warmup_size(n_texts: int | None) -> int:
    """Sequences that fix the boundaries: HeadVis's max(50, n / 10) capped at 2,000 from 500 texts up; below
    that n / 10 (at least 1) instead of 50, so that a small corpus keeps examples (HeadVis samples none of its
    warmup). 50 when the count is not known."""
    if n_texts is None:
        return 50
    return max(1, min(WARMUP_MOST, n_texts // 10))


@dataclass
class SequenceExamples:
    """One sequence's per-head findings: `max` float32 [L, H], each row's top-k weights `top_values` float32 and
    their columns `top_columns` int64 [L, H, T, k] (0: none), `qk_mass` float64 [L, H, bins], its length and its
    tokens' texts. `coo(layer, head)` makes one head's sparse rows from the top-k only when a sampler keeps the
    sequence for that head: after the first few hundred sequences most heads keep none of a new one."""

    max: np.ndarray
    top_values: np.ndarray
    top_columns: np.ndarray
    qk_mass: np.ndarray
    seq_len: int
    threshold: float = SPARSE_THRESHOLD
    has_rows: np.ndarray | None = None  # bool [L, H]: the heads whose top-k rows were taken (None: every head)
    tokens: list[str] = field(default_factory=list)
    rows: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None  # `compacted`'s COO per head

    def coo(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(flat indices i * T + j int64, values float64 rounded to 4 decimals) of the weights >= threshold among
        each row's top k, sorted by (i, j)."""
        if self.has_rows is not None and not self.has_rows[layer, head]:
            raise RuntimeError(f"L{layer}H{head}'s rows were not taken: the sampler said no head would keep them "
                               "(a sequence offered out of its order?)")
        if self.rows is not None:
            return self.rows[layer, head]
        v, j = self.top_values[layer, head], self.top_columns[layer, head]  # T, k
        q = np.broadcast_to(np.arange(self.seq_len)[:, None], v.shape)
        kept = v >= self.threshold
        q, j, v = q[kept], j[kept], v[kept].astype(np.float64)
        order = np.lexsort((j, q))
        return (q * self.seq_len + j)[order], np.round(v[order], 4)


    def compacted(self) -> SequenceExamples:
        """The same findings with each taken head's COO made now and the [L, H, T, k] top-k arrays dropped: what a
        Ray worker sends back (a few kilobytes a head kept, not the top-k of every head)."""
        n_layers, n_heads = self.max.shape
        taken = np.ones((n_layers, n_heads), bool) if self.has_rows is None else self.has_rows
        rows = {(int(layer), int(head)): self.coo(int(layer), int(head)) for layer, head in np.argwhere(taken)}
        empty = np.zeros((n_layers, n_heads, 0, 0))
        return SequenceExamples(self.max, empty.astype(np.float32), empty.astype(np.int64), self.qk_mass,
                                self.seq_len, self.threshold, taken, self.tokens, rows)


class AtlasExamples:
    """A Reduction of one sequence of `n_tokens` positions: per layer each head's running max (position 0 left
    out), each row's top-k weights and the mass per distance bin; `result()` a SequenceExamples (no tokens)."""

    def __init__(self, n_tokens: int, top_k: int = TOP_K, threshold: float = SPARSE_THRESHOLD,
                 keeps: Callable[[int, np.ndarray], np.ndarray] | None = None) -> None:
        """`keeps(layer, max)`: which heads (bool [H]) will keep this sequence, given each head's max over the
        sequence (float32 [H]); a head no sampler keeps needs no top-k rows, the costliest part of the pass
        (Samplers.keeps). Asked at a layer's last block, when its max is final, the blocks before it held until
        then (where the layer's probabilities fit in WAIT_BYTES; else every head's rows are taken); None: every
        head."""
        self.n, self.k, self.threshold, self.keeps = n_tokens, min(top_k, n_tokens), threshold, keeps
        self.layers: dict[int, list[torch.Tensor]] = {}
        self.rows_of: dict[int, torch.Tensor] = {}  # per layer: bool [H], whose top-k rows were taken
        self._bins: dict[tuple, torch.Tensor] = {}  # a block shape's |i - j| bin per diagonal, shared by the layers
        self.fresh_from: dict[int, int] = {}  # per layer: the first row no block has held yet
        self._pending: dict[int, list] = {}  # per layer: its blocks (probabilities, r0, c0) awaiting its max
        self._scratch: dict = {}  # diagonal_sums' padded copies (where AtlasSums does not make them first)

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        if n_rows != self.n:
            raise ValueError(f"AtlasExamples has {self.n} positions, the pass {n_rows}")
        self.layers[layer] = [
            torch.zeros(n_heads, device=device),  # max
            torch.zeros(n_heads, n_rows, self.k, device=device),  # top values (0: none yet)
            torch.zeros(n_heads, n_rows, self.k, dtype=torch.int64, device=device),  # their columns
            torch.zeros(n_heads, len(QK_DISTANCE_EDGES), dtype=torch.float64, device=device),  # last: d >= 4096
        ]
        self.rows_of[layer] = torch.ones(n_heads, dtype=torch.bool)
        self.fresh_from.pop(layer, None)
        self._pending.pop(layer, None)

    def add(self, layer: int, block: Block) -> None:
        p, r0, c0 = block.probs, block.r0, block.c0
        top, values, columns, mass = self.layers[layer]
        h, r, c = p.shape
        inner = p[:, max(0, 1 - r0):, max(0, 1 - c0):]  # rows and columns >= 1
        if inner.numel():
            torch.maximum(top, inner.amax((-2, -1)), out=top)
        if self.keeps is None or h * self.n * self.n * p.element_size() > WAIT_BYTES:
            self._top_rows(layer, p, r0, c0, values, columns, None)  # every head's
        else:  # the top k waits for the layer's max, final at its last block, and then the heads that keep it
            pending = self._pending.setdefault(layer, [])
            pending.append((p, r0, c0))  # held, not copied: the kernel neither reuses nor overwrites a block
            if r0 + r == self.n:  # the row kernel's blocks come in row order: the layer's last
                wanted = torch.from_numpy(np.asarray(self.keeps(layer, top.cpu().numpy()), dtype=bool))
                self.rows_of[layer] = wanted
                heads = wanted.nonzero()[:, 0].to(p.device)
                blocks = self._pending.pop(layer)
                if heads.numel():
                    for held, b0, d0 in blocks:
                        self._top_rows(layer, held[heads], b0, d0, values, columns, heads)
        distance, sums = block.share("diagonal_sums", lambda: diagonal_sums(p, r0, c0, self._scratch))
        mass.index_add_(1, self._bins_of(diagonal_key(block), distance), sums)

    def _top_rows(self, layer: int, p: torch.Tensor, r0: int, c0: int, values: torch.Tensor, columns: torch.Tensor,
                  heads: torch.Tensor | None) -> None:
        """Each row's top k of the block merged into the rows' top k so far (all heads, or those `heads`). Rows
        no earlier block of the layer held (the row kernel's blocks hold each row once) take the block's top k
        as it is: there is nothing to merge."""
        _, r, c = p.shape
        v, j = p.topk(min(self.k, c), dim=-1)  # H, R, kc
        pick = slice(None) if heads is None else heads
        if r0 >= self.fresh_from.get(layer, 0):
            self.fresh_from[layer] = r0 + r
            kc = v.shape[-1]
            values[pick, r0 : r0 + r, :kc] = v  # the slots after kc stay 0: no weight
            columns[pick, r0 : r0 + r, :kc] = j + c0
            return
        both_v = torch.cat((values[pick, r0 : r0 + r], v), -1)
        both_j = torch.cat((columns[pick, r0 : r0 + r], j + c0), -1)
        v, at = both_v.topk(self.k, dim=-1)
        values[pick, r0 : r0 + r] = v
        columns[pick, r0 : r0 + r] = both_j.gather(-1, at)

    def _bins_of(self, key: tuple, distance: torch.Tensor) -> torch.Tensor:
        """[D] int64: the bin of |d| in QK_DISTANCE_EDGES (the last: >= 4,096) of each diagonal of
        `diagonal_sums`; made once a block shape (`key`, atlas_metrics.diagonal_key)."""
        if key not in self._bins:
            edges = torch.tensor(QK_DISTANCE_EDGES, device=distance.device)
            self._bins[key] = torch.bucketize(distance.abs(), edges, right=True) - 1
        return self._bins[key]

    def result(self) -> SequenceExamples:
        order = sorted(self.layers)
        layers = [[t.cpu() for t in self.layers[layer]] for layer in order]
        return SequenceExamples(
            np.stack([top.numpy() for top, _, _, _ in layers]),
            np.stack([values.numpy() for _, values, _, _ in layers]),
            np.stack([columns.numpy() for _, _, columns, _ in layers]),
            np.stack([mass[:, :-1].numpy() for _, _, _, mass in layers]), self.n, self.threshold,
            has_rows=np.stack([self.rows_of[layer].numpy() for layer in order]))


@torch.inference_mode()
def sequence_measures(module, ids, device="cpu", threshold: float = INDUCTION_THRESHOLD,
                      chunk_rows: int | None = None, keeps=None) -> tuple[HeadSums, SequenceExamples | None]:
    """One forward pass of `module` on `ids`: its HeadSums (atlas_metrics.sequence_sums') and its examples (the
    top-k rows of the heads `keeps` names: AtlasExamples); a sequence of one token runs no pass (skipped, no
    examples)."""
    c = module.config
    if len(ids) < 2:
        skipped = HeadSums.zeros(c.n_layers, c.n_heads)
        skipped.skipped = 1
        return skipped, None
    sums, examples = AtlasSums(ids, threshold), AtlasExamples(len(ids), keeps=keeps)
    reducer = Reducer({"atlas": sums, "examples": examples}, len(ids), chunk_rows=chunk_rows or block_rows(len(ids)),
                      keep=False)
    tensor = torch.tensor([list(ids)], dtype=torch.long, device=device)
    module(tensor, torch.ones_like(tensor), torch.zeros_like(tensor), with_logits=False, record=reducer)
    return sums.result(), examples.result()


@dataclass
class Example:
    """One kept sequence of one head."""

    sequence_id: int
    max: float
    indices: np.ndarray
    values: np.ndarray
    seq_len: int


def _example(found: SequenceExamples, sequence_id: int, value: float, layer: int, head: int) -> Example:
    return Example(sequence_id, value, *found.coo(layer, head), found.seq_len)


@lru_cache(maxsize=1 << 16)  # a slot's few members are ranked again at each offer: their hashes are kept
def _hash_priority(seed: int, layer: int, head: int, interval: int, sequence_id: int) -> int:
    """A sequence's priority in one head's lower interval (module docstring): the smallest are kept."""
    digest = hashlib.blake2b(f"{seed}:{layer}:{head}:{interval}:{sequence_id}".encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class Samplers:
    """Every head's HeadVis sample (module docstring) over the sequences `add`ed, and its histograms."""

    def __init__(self, n_layers: int, n_heads: int, warmup: int, seed: int = SEED, n_intervals: int = N_INTERVALS,
                 per_interval: int = SAMPLES_PER_INTERVAL, per_top: int = TOP_SAMPLES) -> None:
        self.shape, self.warmup, self.seed = (n_layers, n_heads), warmup, seed
        self.n_intervals, self.per_interval, self.per_top = n_intervals, per_interval, per_top
        self.warmup_maxes: list[np.ndarray] = []  # [L, H] each, until the boundaries are set
        self.boundaries: np.ndarray | None = None  # L, H, n_intervals - 1
        self.kept: dict[tuple[int, int, int], list[Example]] = {}  # (layer, head, interval 1..): examples
        self.n_seen = np.zeros((n_layers, n_heads, n_intervals), np.int64)
        self.max_counts = np.zeros((n_layers, n_heads, MAX_BINS), np.int64)
        self.max_sum = np.zeros((n_layers, n_heads))
        self.n_max = 0
        self.qk_mass = np.zeros((n_layers, n_heads, len(QK_DISTANCE_EDGES) - 1))
        self.tokens: dict[int, list[str]] = {}
        # What the atlas's tables hold already, so that a save writes only what changed since the last commit:
        # the slots (layer, head, interval) changed since, and the sequence ids whose tokens are stored.
        self.changed: set[tuple[int, int, int]] = set()
        self.stored_ids: set[int] = set()
        self._saving: tuple[set, set] | None = None

    def settings(self) -> dict:
        """What a shard's sampler shares with this one (`for_shard`): the shape and the sampling rule."""
        return {"n_layers": self.shape[0], "n_heads": self.shape[1], "seed": self.seed,
                "n_intervals": self.n_intervals, "per_interval": self.per_interval, "per_top": self.per_top}

    @classmethod
    def for_shard(cls, settings: dict, boundaries: np.ndarray) -> Samplers:
        """A sampler of one shard of the corpus (a Ray worker's texts, offered in corpus order) with the whole
        corpus's boundaries: of the shard's sequences it keeps at least those the whole corpus's sampler keeps
        (`_decide`), so asked ahead (`keeps`) it names every head whose rows the corpus's sampler will want."""
        self = cls(warmup=0, **settings)
        self.boundaries = np.array(boundaries, dtype=np.float64)
        return self

    def capacity(self, interval: int) -> int:
        return max(self.per_interval, self.per_top) if self.n_intervals == 1 else (
            self.per_top if interval == self.n_intervals else self.per_interval)

    def add(self, sequence_id: int, found: SequenceExamples) -> None:
        maxes = found.max.astype(np.float64)
        bins = np.clip((found.max * MAX_BINS).astype(np.int64), 0, MAX_BINS - 1)
        np.put_along_axis(self.max_counts, bins[..., None],
                          np.take_along_axis(self.max_counts, bins[..., None], -1) + 1, -1)
        self.max_sum += maxes
        self.n_max += 1
        self.qk_mass += found.qk_mass
        if self.boundaries is None:
            self.warmup_maxes.append(found.max.copy())
            if len(self.warmup_maxes) >= self.warmup:
                self.set_boundaries()
            return
        intervals = self._intervals(maxes, self.boundaries)
        kept = False
        for (layer, head), interval in np.ndenumerate(intervals):
            value = float(found.max[layer, head])
            kept |= self._keep(layer, head, int(interval), int(sequence_id), value,
                               partial(_example, found, sequence_id, value, layer, head))
        if kept:
            self.tokens[sequence_id] = found.tokens

    def set_boundaries(self) -> None:
        """Each head's interval boundaries: the (i / n_intervals) quantiles of the warmup's max, i = 1 ..
        n_intervals - 1 (the sorted value at round(i n / n_intervals)), 0 where there was no warmup."""
        n_layers, n_heads = self.shape
        if not self.warmup_maxes:
            self.boundaries = np.zeros((n_layers, n_heads, self.n_intervals - 1))
        else:
            ordered = np.sort(np.stack(self.warmup_maxes), axis=0)  # N, L, H
            n = len(ordered)
            at = [min(int(round(i * n / self.n_intervals)), n - 1) for i in range(1, self.n_intervals)]
            self.boundaries = np.moveaxis(ordered[at].astype(np.float64), 0, -1).reshape(
                n_layers, n_heads, self.n_intervals - 1)
        self.warmup_maxes = []

    def _decide(self, layer: int, head: int, interval: int, sequence_id: int, value: float) -> int | None:
        """Where in its slot one head's interval would put a sequence offered now (None: it would not keep it):
        the top interval keeps the largest max, earlier on ties; a lower one the smallest priority (`_hash_priority`).
        Reads the state only, so `keeps` can ask it ahead of `add`. Either rule keeps a sequence offered now only
        if it would keep it among any subset of the sequences offered before it (what a Ray worker relies on)."""
        slot = self.kept.get((layer, head, interval), [])
        cap = self.capacity(interval)
        if interval == self.n_intervals or self.n_intervals == 1:
            if len(slot) >= cap and (-value, sequence_id) > (-slot[-1].max, slot[-1].sequence_id):
                return None
            return len(slot)  # appended, then sorted into place
        if len(slot) < cap:
            return len(slot)
        ranks = [(self._priority(layer, head, interval, e.sequence_id), e.sequence_id) for e in slot]
        last = max(range(len(slot)), key=ranks.__getitem__)
        return last if (self._priority(layer, head, interval, sequence_id), sequence_id) < ranks[last] else None

    def _priority(self, layer: int, head: int, interval: int, sequence_id: int) -> int:
        return _hash_priority(self.seed, layer, head, interval, sequence_id)

    def _intervals(self, maxes: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
        """int64, `maxes`' shape: the interval (1 lowest) each head's max falls in, bisect_right over its
        `boundaries` (the last axis; all heads' [L, H, n - 1], or one layer's [H, n - 1])."""
        if self.n_intervals == 1:
            return np.ones(maxes.shape, np.int64)
        return np.minimum((boundaries <= maxes[..., None]).sum(-1), self.n_intervals - 1) + 1

    def keeps(self, sequence_id: int) -> Callable[[int, np.ndarray], np.ndarray]:
        """The predicate AtlasExamples asks for the sequence to be offered next as `sequence_id`: given one
        layer's max per head, which heads will keep it (none during the warmup, which only fixes boundaries)."""

        def which(layer: int, maxes: np.ndarray) -> np.ndarray:
            if self.boundaries is None:
                return np.zeros(len(maxes), bool)
            values = np.asarray(maxes, np.float32).astype(np.float64)
            intervals = self._intervals(values, self.boundaries[layer])
            return np.array([self._decide(layer, head, int(intervals[head]), sequence_id, float(values[head]))
                             is not None for head in range(len(values))])

        return which

    def _keep(self, layer: int, head: int, interval: int, sequence_id: int, value: float,
              example: Callable[[], Example]) -> bool:
        """Offer a sequence to one head's interval; `example()` makes its Example only when it is kept (its sparse
        rows cost more than the offer). Whether it was kept."""
        at = self._decide(layer, head, interval, sequence_id, value)
        self.n_seen[layer, head, interval - 1] += 1
        if at is None:
            return False
        slot = self.kept.setdefault((layer, head, interval), [])
        if at == len(slot):
            slot.append(example())
            if interval == self.n_intervals or self.n_intervals == 1:
                slot.sort(key=lambda e: (-e.max, e.sequence_id))
                del slot[self.capacity(interval):]
        else:
            slot[at] = example()
        self.changed.add((layer, head, interval))
        return True

    def examples(self, layer: int, head: int) -> list[tuple[int, Example]]:
        """(interval, example) of one head, interval 1 (lowest) first; the top interval by max, descending."""
        return [(interval, e) for interval in range(1, self.n_intervals + 1)
                for e in self.kept.get((layer, head, interval), [])]

    # Storage in the atlas's DuckDB (attnviz.readouts.atlas calls these inside its transactions).

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS examples (layer INTEGER, head INTEGER, interval INTEGER, sequence_id BIGINT, "
        "max DOUBLE, attention_indices BIGINT[], attention_values DOUBLE[], seq_len INTEGER, position INTEGER)",
        "CREATE TABLE IF NOT EXISTS sequences (id BIGINT, tokens VARCHAR[])",
        "CREATE TABLE IF NOT EXISTS max_histogram (layer INTEGER, head INTEGER, bin_edges DOUBLE[], "
        "bin_values BIGINT[], max_sum DOUBLE, n_sequences BIGINT)",
        "CREATE TABLE IF NOT EXISTS qk_distance_mass (layer INTEGER, head INTEGER, bin_edges DOUBLE[], "
        "bin_values DOUBLE[])",
        "CREATE TABLE IF NOT EXISTS example_state (layer INTEGER, head INTEGER, boundaries DOUBLE[], "
        "n_seen BIGINT[], warmup_maxes DOUBLE[])",
        "CREATE TABLE IF NOT EXISTS example_settings (warmup INTEGER, seed BIGINT, n_intervals INTEGER, "
        "per_interval INTEGER, per_top INTEGER, top_k INTEGER, threshold DOUBLE)",
    )

    def save(self, con) -> None:
        """Into the atlas's tables, inside the caller's transaction (`committed()` after its COMMIT): the examples
        of the slots changed since the last commit, the tokens of sequences newly kept (those no longer kept
        deleted), and the histograms, state and settings (a few rows a head) whole."""
        for table in ("max_histogram", "qk_distance_mass", "example_state", "example_settings"):
            con.execute(f"DELETE FROM {table}")
        con.execute("INSERT INTO example_settings VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [self.warmup, self.seed, self.n_intervals, self.per_interval, self.per_top, TOP_K,
                     SPARSE_THRESHOLD])
        changed = sorted(self.changed)
        if changed:
            con.register("_changed_slots", {name: np.array([slot[i] for slot in changed], np.int64)
                                             for i, name in enumerate(("layer", "head", "interval"))})
            try:
                con.execute("DELETE FROM examples USING _changed_slots AS c WHERE examples.layer = c.layer AND "
                            "examples.head = c.head AND examples.interval = c.interval")
            finally:
                con.unregister("_changed_slots")
        rows = []
        for layer, head, interval in changed:
            # each example's position in its slot, the order in which the page lists them
            for position, e in enumerate(self.kept.get((layer, head, interval), [])):
                rows.append([layer, head, interval, e.sequence_id, e.max, e.indices, e.values, e.seq_len, position])
        insert_rows(con, "examples", rows)
        used = {e.sequence_id for examples in self.kept.values() for e in examples}
        gone = sorted(self.stored_ids - used)
        if gone:
            con.execute("DELETE FROM sequences WHERE list_contains(?, id)", [gone])
        insert_rows(con, "sequences", [[i, self.tokens[i]] for i in sorted(used - self.stored_ids)])
        self._saving = (set(changed), used)
        max_edges = np.round(np.linspace(0.0, 1.0, MAX_BINS + 1), 4).tolist()
        warm = np.stack(self.warmup_maxes) if self.warmup_maxes else np.zeros((0, *self.shape))
        heads, mass, state = [], [], []
        for layer in range(self.shape[0]):
            for head in range(self.shape[1]):
                heads.append([layer, head, max_edges, self.max_counts[layer, head].tolist(),
                              float(self.max_sum[layer, head]), self.n_max])
                mass.append([layer, head, list(map(float, QK_DISTANCE_EDGES)), self.qk_mass[layer, head].tolist()])
                bounds = None if self.boundaries is None else self.boundaries[layer, head].tolist()
                state.append([layer, head, bounds, self.n_seen[layer, head].tolist(),
                              warm[:, layer, head].astype(np.float64).tolist()])
        insert_rows(con, "max_histogram", heads)
        insert_rows(con, "qk_distance_mass", mass)
        insert_rows(con, "example_state", state)

    @staticmethod
    def compact(con) -> None:
        """Rewrite the examples in (layer, head, interval, position) order, at a build's end: the rows a commit
        deleted (a slot's earlier examples) are gone, and each head's rows sit together, so that reading one head
        (attnviz.readouts.atlas_head) skips the row groups of the others by their min-max layer and head."""
        con.execute("CREATE TABLE examples_sorted AS SELECT * FROM examples "
                    "ORDER BY layer, head, interval, position")
        con.execute("DROP TABLE examples")
        con.execute("ALTER TABLE examples_sorted RENAME TO examples")

    def committed(self) -> None:
        """The transaction of the last `save` committed: what it wrote is what the tables hold (a rolled-back one
        leaves `changed` as it was, to be written by the next save)."""
        if self._saving is not None:
            written, used = self._saving
            self.changed -= written
            self.stored_ids = used
            self.tokens = {i: tokens for i, tokens in self.tokens.items() if i in used}
            self._saving = None

    @classmethod
    def load(cls, con, n_layers: int, n_heads: int, warmup: int) -> Samplers:
        """The samplers stored in an atlas (a fresh one where none is: `warmup` then)."""
        settings = con.execute("SELECT warmup, seed, n_intervals, per_interval, per_top FROM example_settings"
                               ).fetchall()
        if not settings:
            return cls(n_layers, n_heads, warmup)
        self = cls(n_layers, n_heads, *settings[0][:2], *settings[0][2:])
        tokens = dict(con.execute("SELECT id, tokens FROM sequences").fetchall())
        for layer, head, interval, sid, value, indices, values, seq_len in con.execute(
                "SELECT layer, head, interval, sequence_id, max, attention_indices, attention_values, seq_len "
                "FROM examples ORDER BY layer, head, interval, position").fetchall():
            self.kept.setdefault((layer, head, interval), []).append(
                Example(int(sid), float(value), np.asarray(indices, np.int64), np.asarray(values, np.float64),
                        int(seq_len)))
            self.tokens[int(sid)] = list(tokens[sid])
        self.stored_ids = set(self.tokens)
        warm = None
        for layer, head, counts, max_sum, n_max in con.execute(
                "SELECT layer, head, bin_values, max_sum, n_sequences FROM max_histogram").fetchall():
            self.max_counts[layer, head] = counts
            self.max_sum[layer, head], self.n_max = max_sum, int(n_max)
        for layer, head, values in con.execute("SELECT layer, head, bin_values FROM qk_distance_mass").fetchall():
            self.qk_mass[layer, head] = values
        for layer, head, bounds, seen, maxes in con.execute(
                "SELECT layer, head, boundaries, n_seen, warmup_maxes FROM example_state").fetchall():
            if bounds is not None:
                if self.boundaries is None:
                    self.boundaries = np.zeros((n_layers, n_heads, self.n_intervals - 1))
                self.boundaries[layer, head] = bounds
            self.n_seen[layer, head] = seen
            if warm is None:
                warm = np.zeros((len(maxes), n_layers, n_heads), np.float32)
            warm[:, layer, head] = maxes
        if self.boundaries is None and warm is not None:
            self.warmup_maxes = list(warm)
        return self
