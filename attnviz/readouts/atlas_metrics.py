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


class AtlasSums:
    """A Reduction (attnviz.transformer.reducer) of one sequence's `ids` (the token ids, for the induction
    score): each layer's six sums and the sink share's, float64 [7, H] on the layer's device; `result()` the
    sequence's HeadSums."""

    def __init__(self, ids, threshold: float = INDUCTION_THRESHOLD) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.threshold = threshold
        self.repeated = induction_rows(self.ids)  # T bool
        self.layers: dict[int, torch.Tensor] = {}
        self._tokens: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        if n_rows != self.ids.size:
            raise ValueError(f"AtlasSums has {self.ids.size} token ids, the pass {n_rows} positions")
        self.layers[layer] = torch.zeros(len(SUMS) + 1, n_heads, dtype=torch.float64, device=device)

    def add(self, layer: int, block: Block) -> None:
        """Add one block's rows r0.. over columns c0..; every (row, column) is in exactly one block, and a column
        a block leaves out (after a causal row, outside a sliding window) has probability 0."""
        p, r0, c0, acc = block.probs, block.r0, block.c0, self.layers[layer]
        _, r, c = p.shape
        acc[0] += torch.diagonal(p, offset=r0 - c0, dim1=-2, dim2=-1).sum(-1, dtype=torch.float64)
        acc[1] += torch.diagonal(p, offset=r0 - 1 - c0, dim1=-2, dim2=-1).sum(-1, dtype=torch.float64)
        acc[2] -= torch.special.xlogy(p, p).sum((-2, -1), dtype=torch.float64)
        rows = torch.arange(r0, r0 + r, device=p.device, dtype=torch.float32)
        cols = torch.arange(c0, c0 + c, device=p.device, dtype=torch.float32)
        d = (rows[:, None] - cols[None, :]).abs_()  # R, C: exact integers in float32 (|i - j| < 2^24)
        weighted = p * d  # H, R, C
        acc[3] += weighted.sum((-2, -1), dtype=torch.float64)
        acc[4] += (weighted * d).sum((-2, -1), dtype=torch.float64)  # p d^2, d^2 exact below 4,096 tokens
        if self.repeated[r0 : r0 + r].any():
            acc[5] += self._induction(p, r0, c0)
        if c0 == 0 and r0 + r > 1:  # the first token's column, rows after the first (the sink share)
            acc[6] += p[:, max(0, 1 - r0):, 0].sum(-1, dtype=torch.float64)

    def _induction(self, p: torch.Tensor, r0: int, c0: int) -> torch.Tensor:
        """[H] float64: sum over the block's (i, j) with j - 1 < i and token[j - 1] == token[i] of p[i, j] where
        p[i, j] >= threshold. Each earlier occurrence k = j - 1 of row i's token is one such j."""
        _, r, c = p.shape
        ids, before = self._on(p.device)  # T; T (token[j - 1], -1 at j = 0)
        rows = torch.arange(r0, r0 + r, device=p.device)
        cols = torch.arange(c0, c0 + c, device=p.device)
        match = (before[c0 : c0 + c][None, :] == ids[r0 : r0 + r][:, None]) & (cols[None, :] <= rows[:, None])
        kept = match & (p >= self.threshold)  # H, R, C
        return torch.where(kept, p, 0.0).sum((-2, -1), dtype=torch.float64)

    def _on(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        made = self._tokens.get(device)
        if made is None:
            ids = torch.from_numpy(self.ids).to(device)
            before = torch.cat((torch.full((1,), -1, dtype=torch.int64, device=device), ids[:-1]))
            made = self._tokens[device] = (ids, before)
        return made

    def result(self) -> HeadSums:
        n = int(self.ids.size)
        sums = np.stack([self.layers[layer].cpu().numpy() for layer in sorted(self.layers)])  # L, 7, H
        return HeadSums(*(sums[:, k] for k in range(len(SUMS))), positions=n, prev_positions=n - 1,
                        induction_positions=int(self.repeated.sum()), sequences=1,
                        first_token=sums[:, len(SUMS)] / (n - 1))


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
