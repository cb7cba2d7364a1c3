"""HeadVis's six head metrics (Luger, Kamath et al., "Visualizing Attention Heads", Anthropic 2026; its public
pipeline is neuronpedia's `headvis/compute-head-metrics.py`) as sums and counts that one streaming forward pass
fills, block by block, with no [T, T] map held: the `AtlasSums` reduction (attnviz.transformer.reducer), and
`HeadSums`, the plain numpy sums and counts that add exactly over texts and shards.

For one sequence of T >= 2 tokens with attention p (rows: query positions i, columns: key positions j), per head:

- self_attention_score = sum_i p[i, i] / sum T
- prev_token_score = sum_{i >= 1} p[i, i - 1] / sum (T - 1)
- pattern_entropy = sum_i sum_j -p[i, j] log p[i, j] / sum T (0 log 0 = 0)
- qk_distance = E[d] = sum_i sum_j p[i, j] |i - j| / sum T
- qk_distance_variance = E[d^2] - E[d]^2, with E[d^2] = sum_i sum_j p[i, j] (i - j)^2 / sum T (one pooled
  variance, not a mean of each row's)
- induction_score = sum over pairs (i, k) with k < i and token[k] == token[i] of p[i, k + 1] where it is
  >= INDUCTION_THRESHOLD (else 0), divided by the number of query positions i that have such a k

Every sum runs over every query position of every sequence (position 0, BOS where the tokenizer adds one,
included), and the counts are pooled the same way, so a metric is a ratio of two totals, not a mean of per-text
means. A sequence of one token is left out (HeadVis's pipeline drops sequences shorter than 2) and counted in
`skipped`. Sums are float64; the elementwise products are made in float32 (the probabilities' own precision).
Shape legend: L layers, H query heads, T query positions, R rows of a block, C its columns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from attnviz.transformer.model import Transformer
from attnviz.transformer.reducer import CHUNK_ROWS, Block, Reducer

INDUCTION_THRESHOLD = 0.01  # HeadVis's DEFAULT_INDUCTION_ATTENTION_THRESHOLD
TINY = torch.finfo(torch.float32).tiny
SCRATCH_BYTES = 32 * 2**20  # the padded copies `diagonal_sums` keeps (T = 512: two block shapes, 16 MB)
LONG_BLOCK_ROWS = 128  # `block_rows` of a sequence longer than CHUNK_ROWS
DIAGONAL_ROWS = 16  # rows a float32 partial sum of `diagonal_sums` runs over (relative error below 16 x 6e-8)
METRICS = ("self_attention_score", "prev_token_score", "pattern_entropy", "qk_distance", "qk_distance_variance",
           "induction_score")
# The float64 [L, H] sums of HeadSums, in this order in an AtlasSums accumulator.
SUMS = ("self_attention", "prev_token", "entropy", "distance", "distance_squared", "induction")
# The integer counts of HeadSums: query positions pooled, rows with a previous token, rows with an earlier
# occurrence of their token, sequences pooled, sequences of one token left out.
COUNTS = ("positions", "prev_positions", "induction_positions", "sequences", "skipped")
# The rows of an AtlasSums accumulator: first the four read off the diagonal sums (`AtlasSums._weights`), then
# the sink share's sum ("first_token"), the entropy's and the induction's.
ROWS = ("self_attention", "prev_token", "distance", "distance_squared", "first_token", "entropy", "induction")


@dataclass
class HeadSums:
    """The sums and counts the six metrics are ratios of (module docstring): `SUMS` float64 [L, H], `COUNTS` ints.
    `a + b` is the sums of both corpora (exact for the counts; the float64 sums up to the order of addition)."""

    self_attention: np.ndarray
    prev_token: np.ndarray
    entropy: np.ndarray
    distance: np.ndarray
    distance_squared: np.ndarray
    induction: np.ndarray
    positions: int = 0
    prev_positions: int = 0
    induction_positions: int = 0
    sequences: int = 0
    skipped: int = 0
    # The sink share's sum (attnviz.readouts.atlas_causal): per sequence, the mean over its query rows after the
    # first of the weight on position 0 (readouts.sinks.first_token_means' rule), summed over sequences; float64
    # [L, H], zeros when not given. Not in SUMS: it is stored in the atlas's `sink_share` table.
    first_token: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.first_token is None:
            self.first_token = np.zeros(self.self_attention.shape)

    @classmethod
    def zeros(cls, n_layers: int, n_heads: int) -> HeadSums:
        return cls(*(np.zeros((n_layers, n_heads)) for _ in SUMS))

    @property
    def shape(self) -> tuple[int, int]:
        return self.self_attention.shape

    def __add__(self, other: HeadSums) -> HeadSums:
        if not isinstance(other, HeadSums):
            return NotImplemented
        if other.shape != self.shape:
            raise ValueError(f"sums of {self.shape} heads and of {other.shape} heads do not add: another model?")
        return HeadSums(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def metrics(self) -> dict[str, np.ndarray]:
        """{metric: float64 [L, H]} in METRICS order; NaN where its count is 0 (no sequence of 2 tokens, or no
        repeated token for the induction score), as HeadVis's pipeline gives."""

        def ratio(total: np.ndarray, count: int) -> np.ndarray:
            return total / count if count else np.full(self.shape, np.nan)

        distance = ratio(self.distance, self.positions)
        return {
            "self_attention_score": ratio(self.self_attention, self.positions),
            "prev_token_score": ratio(self.prev_token, self.prev_positions),
            "pattern_entropy": ratio(self.entropy, self.positions),
            "qk_distance": distance,
            "qk_distance_variance": ratio(self.distance_squared, self.positions) - distance**2,
            "induction_score": ratio(self.induction, self.induction_positions),
        }


def diagonal_sums(p: torch.Tensor, r0: int, c0: int, scratch: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The sums of a block's probabilities along each diagonal: (d int64 [D], float64 [H, D]), the signed
    distance d = i - j of each diagonal (descending) and the sum of p[i, j] over the block's cells with i - j = d,
    for the block p [H, R, C] of rows r0.. and columns c0.. Every function of d alone summed over the block
    (HeadVis's diagonal, previous-token and distance sums, the distance histogram) is then a product with these:
    one pass over p instead of one each.

    Each row sits in a copy padded by zeros on both sides, read through a view whose row stride is one more than
    the copy's, so that a diagonal of p is a column of the view. The columns are summed in float32 over
    DIAGONAL_ROWS rows at a time (a float64 sum of a strided view would first copy it whole in float64) and those
    sums in float64. `scratch` (a dict the caller keeps) holds the padded copy of each block shape between calls,
    so its zeros are written once (at most SCRATCH_BYTES of them)."""
    h, r, c = p.shape
    rows = -(-r // DIAGONAL_ROWS) * DIAGONAL_ROWS  # R rounded up: the rows after R are zeros
    width = c + 2 * (rows - 1)
    key = (h, r, c, p.dtype, p.device)
    padded = None if scratch is None else scratch.get(key)
    if padded is None:
        padded = p.new_zeros(h, rows, width)  # H, R', C + 2(R' - 1)
        if scratch is not None:
            if sum(t.nbytes for t in scratch.values()) + padded.nbytes > SCRATCH_BYTES:
                scratch.clear()
            scratch[key] = padded
    padded[:, :r, rows - 1 : rows - 1 + c] = p
    # [h, k, row, y] -> padded[h, k * DIAGONAL_ROWS + row, that row + y]: the cell of row k * DIAGONAL_ROWS + row
    # on the diagonal d = R' - 1 - y (relative to the block's corner)
    n = rows + c - 1
    skewed = padded.as_strided((h, rows // DIAGONAL_ROWS, DIAGONAL_ROWS, n),
                               (rows * width, DIAGONAL_ROWS * (width + 1), width + 1, 1))
    distance = (r0 - c0) + (rows - 1) - torch.arange(n, device=p.device)
    return distance, skewed.sum(2).double().sum(1)


def diagonal_key(block: Block) -> tuple:
    """What the distances of a block's `diagonal_sums` depend on (its corner's r0 - c0 and its shape), the same
    for every layer: the key of the tables made of those distances, read without a device round trip (as
    `int(distance[0])` would be, once a block on a GPU)."""
    return (block.r0 - block.c0, *block.probs.shape[1:], block.probs.device)


def block_rows(n_tokens: int) -> int:
    """The query rows of a block of an atlas pass over `n_tokens`: the whole sequence up to CHUNK_ROWS (one block
    a layer, whose maximum is then final before any top k is taken: atlas_examples.AtlasExamples), else
    LONG_BLOCK_ROWS, whose causal blocks leave out more of the keys no row of theirs sees (SmolLM2 at 512 tokens: a
    text 7% cheaper than in blocks of 256)."""
    return n_tokens if n_tokens <= CHUNK_ROWS else LONG_BLOCK_ROWS


def induction_rows(ids) -> np.ndarray:
    """[T] bool: which query positions have an earlier occurrence of their own token."""
    seen: set[int] = set()
    rows = np.zeros(len(ids), bool)
    for i, token in enumerate(ids):
        rows[i] = token in seen
        seen.add(token)
    return rows


def induction_pairs(ids) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) int64 arrays: every query position i and key position j = k + 1 for each earlier occurrence k < i of
    token[i]; the cells the induction score reads."""
    where: dict[int, list[int]] = {}
    rows, cols = [], []
    for i, token in enumerate(np.asarray(ids).tolist()):
        earlier = where.setdefault(token, [])
        rows.extend([i] * len(earlier))
        cols.extend(k + 1 for k in earlier)
        earlier.append(i)
    return np.asarray(rows, np.int64), np.asarray(cols, np.int64)


class AtlasSums:
    """A Reduction (attnviz.transformer.reducer) of one sequence's `ids` (the token ids, for the induction
    score): each layer's six sums and the sink share's, float64 [7, H] on the layer's device (rows: ROWS);
    `result()` the sequence's HeadSums."""

    def __init__(self, ids, threshold: float = INDUCTION_THRESHOLD) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.threshold = threshold
        self.repeated = induction_rows(self.ids)  # T bool
        self.layers: dict[int, torch.Tensor] = {}
        self._geometry: dict[tuple, torch.Tensor] = {}  # a block shape's weights (`_weights`), for every layer
        self._scratch: dict = {}  # diagonal_sums' padded copies
        self._all_pairs = induction_pairs(self.ids)
        self._block_pairs: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        if n_rows != self.ids.size:
            raise ValueError(f"AtlasSums has {self.ids.size} token ids, the pass {n_rows} positions")
        self.layers[layer] = torch.zeros(len(ROWS), n_heads, dtype=torch.float64, device=device)

    def add(self, layer: int, block: Block) -> None:
        """Add one block's rows r0.. over columns c0..; every (row, column) is in exactly one block, and a column
        a block leaves out (after a causal row, outside a sliding window) has probability 0.

        The four sums that weigh p[i, j] by a function of d = i - j alone (diagonal, previous token, |d|, d^2)
        are read off the block's diagonal sums (`diagonal_sums`, shared with AtlasExamples' distance histogram):
        one pass over p, float64 sums of the float32 probabilities as before."""
        p, r0, c0, acc = block.probs, block.r0, block.c0, self.layers[layer]
        distance, sums = block.share("diagonal_sums", lambda: diagonal_sums(p, r0, c0, self._scratch))
        acc[:4] += (sums @ self._weights(diagonal_key(block), distance)).T
        if c0 == 0 and r0 + p.shape[1] > 1:  # the first column, rows after the first
            acc[4] += p[:, max(0, 1 - r0):, 0].sum(-1, dtype=torch.float64)
        # 0 log 0 = 0: p * log(max(p, tiny)) is exactly 0 where p is 0, and p log p elsewhere (torch's xlogy is
        # 2.5x slower on the CPU)
        logs = p.clamp_min(TINY).log_().mul_(p)  # one temporary, written in place (three were a pass each more)
        acc[5] -= logs.sum(-1).double().sum(-1)  # float32 per row, float64 over rows
        rows, cols = self._pairs(r0, c0, p.shape[1], p.shape[2], p.device)
        if rows.numel():
            found = p[:, rows, cols]  # H, pairs
            acc[6] += torch.where(found >= self.threshold, found, 0.0).sum(-1, dtype=torch.float64)

    def _weights(self, key: tuple, distance: torch.Tensor) -> torch.Tensor:
        """[D, 4] float64 for the signed distances d of `diagonal_sums`: [d == 0, d == 1, |d|, d^2], the weights
        of self_attention, prev_token, distance and distance_squared; made once a block shape (`key`,
        `diagonal_key`)."""
        made = self._geometry.get(key)
        if made is None:
            d = distance.double()
            made = self._geometry[key] = torch.stack([(d == 0).double(), (d == 1).double(), d.abs(), d * d], -1)
        return made

    def _pairs(self, r0: int, c0: int, r: int, c: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The induction pairs inside the block, in its coordinates: (i, j) with j - 1 < i and token[j - 1] ==
        token[i] (each earlier occurrence k = j - 1 of row i's token is one such j)."""
        key = (r0, c0, r, c, device)
        made = self._block_pairs.get(key)
        if made is None:  # the same for every layer
            i, j = self._all_pairs
            inside = (i >= r0) & (i < r0 + r) & (j >= c0) & (j < c0 + c)
            made = self._block_pairs[key] = (torch.from_numpy(i[inside] - r0).to(device),
                                             torch.from_numpy(j[inside] - c0).to(device))
        return made

    def result(self) -> HeadSums:
        n = int(self.ids.size)
        stacked = np.stack([self.layers[layer].cpu().numpy() for layer in sorted(self.layers)])  # L, 7, H
        sums = {name: stacked[:, k] for k, name in enumerate(ROWS)}
        return HeadSums(*(sums[name] for name in SUMS), positions=n, prev_positions=n - 1,
                        induction_positions=int(self.repeated.sum()), sequences=1,
                        first_token=sums["first_token"] / (n - 1))


@torch.inference_mode()
def sequence_sums(module: Transformer, ids, device="cpu", threshold: float = INDUCTION_THRESHOLD,
                  chunk_rows: int | None = None) -> HeadSums:
    """The HeadSums of one forward pass of `module` on the token ids `ids` (one unpadded sequence, fed as given),
    the probabilities reduced `chunk_rows` query rows at a time (default `block_rows`). A sequence of one token
    runs no pass: it is
    left out (`skipped` 1)."""
    c = module.config
    if len(ids) < 2:
        return HeadSums(*(np.zeros((c.n_layers, c.n_heads)) for _ in SUMS), skipped=1)
    sums = AtlasSums(ids, threshold)
    reducer = Reducer({"atlas": sums}, len(ids), chunk_rows=chunk_rows or block_rows(len(ids)), keep=False)
    tensor = torch.tensor([list(ids)], dtype=torch.long, device=device)
    module(tensor, torch.ones_like(tensor), torch.zeros_like(tensor), with_logits=False, record=reducer)
    return sums.result()
