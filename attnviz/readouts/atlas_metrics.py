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
METRICS = ("self_attention_score", "prev_token_score", "pattern_entropy", "qk_distance", "qk_distance_variance",
           "induction_score")
# The float64 [L, H] sums of HeadSums, in this order in an AtlasSums accumulator.
SUMS = ("self_attention", "prev_token", "entropy", "distance", "distance_squared", "induction")
# The integer counts of HeadSums: query positions pooled, rows with a previous token, rows with an earlier
# occurrence of their token, sequences pooled, sequences of one token left out.
COUNTS = ("positions", "prev_positions", "induction_positions", "sequences", "skipped")
# The rows of an AtlasSums accumulator: first the five its weights' matrix product fills (`AtlasSums._weights`),
# then the entropy's and the induction's; "first_token" is the sink share's sum.
ROWS = ("self_attention", "prev_token", "distance", "distance_squared", "first_token", "entropy", "induction")
TINY = torch.finfo(torch.float32).tiny
CHUNK_CELLS = 32_768  # cells of a block converted to float64 at once (x H x 8 bytes)
GEOMETRY_BYTES = 32 * 2**20  # the block weights one sequence keeps for its layers (T = 512: 8 MB)


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
        self._all_pairs = induction_pairs(self.ids)
        self._block_pairs: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        if n_rows != self.ids.size:
            raise ValueError(f"AtlasSums has {self.ids.size} token ids, the pass {n_rows} positions")
        self.layers[layer] = torch.zeros(len(ROWS), n_heads, dtype=torch.float64, device=device)

    def add(self, layer: int, block: Block) -> None:
        """Add one block's rows r0.. over columns c0..; every (row, column) is in exactly one block, and a column
        a block leaves out (after a causal row, outside a sliding window) has probability 0.

        The five sums that weigh p[i, j] by a function of (i, j) alone (diagonal, previous token, d, d^2, the
        first column) are one float64 matrix product with the block's weights (`_weights`), made once a block
        shape and shared by the layers: one pass over p instead of five, and float64 sums as before."""
        p, r0, c0, acc = block.probs, block.r0, block.c0, self.layers[layer]
        h, r, c = p.shape
        weights = self._weights(r0, c0, r, c, p.device)  # R * C, 5
        flat = p.reshape(h, r * c)
        step = max(1, CHUNK_CELLS // c) * c  # rows at a time: the float64 copy stays a few MB
        for at in range(0, r * c, step):
            acc[:5] += (flat[:, at : at + step].double() @ weights[at : at + step]).T
        # 0 log 0 = 0: p * log(max(p, tiny)) is exactly 0 where p is 0, and p log p elsewhere
        acc[5] -= (p * p.clamp_min(TINY).log()).sum((-2, -1)).double()
        rows, cols = self._pairs(r0, c0, r, c, p.device)
        if rows.numel():
            found = p[:, rows, cols]  # H, pairs
            acc[6] += torch.where(found >= self.threshold, found, 0.0).sum(-1, dtype=torch.float64)

    def _weights(self, r0: int, c0: int, r: int, c: int, device: torch.device) -> torch.Tensor:
        """[R * C, 5] float64, row-major over (i, j) of the block: [i == j, j == i - 1, |i - j|, (i - j)^2,
        j == 0 < i], the weights of self_attention, prev_token, distance, distance_squared and the first token."""
        key = (r0, c0, r, c, device)
        made = self._geometry.get(key)
        if made is not None:
            return made
        i = torch.arange(r0, r0 + r, device=device, dtype=torch.float64)[:, None]
        j = torch.arange(c0, c0 + c, device=device, dtype=torch.float64)[None, :]
        d = (i - j).abs()
        made = torch.stack([(d == 0).double(), (i - j == 1).double(), d, d * d,
                            ((j == 0) & (i > 0)).double()], -1).reshape(r * c, 5)
        if made.nbytes + sum(w.nbytes for w in self._geometry.values()) <= GEOMETRY_BYTES:
            self._geometry[key] = made
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
                  chunk_rows: int = CHUNK_ROWS) -> HeadSums:
    """The HeadSums of one forward pass of `module` on the token ids `ids` (one unpadded sequence, fed as given),
    the probabilities reduced `chunk_rows` query rows at a time. A sequence of one token runs no pass: it is
    left out (`skipped` 1)."""
    c = module.config
    if len(ids) < 2:
        return HeadSums(*(np.zeros((c.n_layers, c.n_heads)) for _ in SUMS), skipped=1)
    sums = AtlasSums(ids, threshold)
    reducer = Reducer({"atlas": sums}, len(ids), chunk_rows=chunk_rows)
    tensor = torch.tensor([list(ids)], dtype=torch.long, device=device)
    module(tensor, torch.ones_like(tensor), torch.zeros_like(tensor), with_logits=False, record=reducer)
    return sums.result()
