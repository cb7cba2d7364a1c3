"""What the Explore page shows of a long text, reduced block by block as the forward pass runs: three
`Reduction`s (attnviz.transformer.reducer) that attnviz.models.reduced_pass gives its Reducer.

- `MosaicTiles`: the pooled mosaic tiles of each view's `Pooling` (attnviz.models.view_poolings), equal to
  attnviz.plots.pooling.pool_tiles of that view's full map;
- `HeadProfileSums`: the head profile of attnviz.analysis.profile (entropy, mean distance, special / first /
  punctuation shares, previous / next / self, confidence, sink mass), summed over rows and divided at the end;
- `RowArgmax`: each row's first strongest key (the profile's positional offset).

What two of them need of the same block is made once and left in the block's `shared` (`row_maximum`,
`first_maximum`, `column_sums`), so reduced_pass's order (tiles first) gives the same values as one pass that
computed everything together. Sums over rows are float64, as the profile's numpy means are.
Shape legend: L layers, H query heads, T query positions, S key positions, R rows of a block, C its columns.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.models.view_poolings import Pooling
from attnviz.transformer.reducer import Block

STATISTICS = ("entropy", "mean_distance", "special", "first", "punctuation", "previous", "next", "self",
              "confidence", "sink_mass")
ARGMAX_CHUNK = 64
COLUMN_SUMS = "column_sums"  # the name in Block.shared both MosaicTiles and HeadProfileSums use


def row_maximum(block: Block) -> torch.Tensor:
    """[H, R]: each row's largest probability."""
    return block.share("row_maximum", lambda: block.probs.amax(-1))


def first_maximum(block: Block) -> torch.Tensor:
    """[H, R] int64: the block column of each row's first maximum, as numpy's argmax."""
    return block.share("first_maximum", lambda: first_index(block.probs))


def column_sums(block: Block) -> torch.Tensor:
    """[H, C]: each column's weight summed over the block's rows. MosaicTiles, run first, leaves them from its
    matmul (a row of ones there costs nothing): the same float32 sums whichever reduction asks."""
    return block.share(COLUMN_SUMS, lambda: block.probs.sum(-2))


def first_index(p: torch.Tensor) -> torch.Tensor:
    """[H, R] int64: each row's first column holding its maximum (numpy's argmax), without torch's indexed
    reduction over every column (several times slower than a plain maximum): the maximum of each chunk of
    ARGMAX_CHUNK columns, the first chunk that holds the row's maximum, the first maximum inside it."""
    c = p.shape[-1]
    n = c // ARGMAX_CHUNK
    if n < 2:
        return p.argmax(-1)
    chunks = p[..., : n * ARGMAX_CHUNK].unflatten(-1, (n, ARGMAX_CHUNK)).amax(-1)  # H, R, n
    if c > n * ARGMAX_CHUNK:
        chunks = torch.cat((chunks, p[..., n * ARGMAX_CHUNK :].amax(-1, keepdim=True)), dim=-1)  # H, R, n + 1
    start = chunks.argmax(-1) * ARGMAX_CHUNK  # H, R: the first chunk holding the maximum
    # the chunk's columns; the last chunk's, past the end, repeat the last column, which a first maximum never is
    at = (start[..., None] + torch.arange(ARGMAX_CHUNK, device=p.device)).clamp_max_(c - 1)  # H, R, chunk
    return start + p.gather(-1, at).argmax(-1)


def stacked(layers: dict[int, torch.Tensor]) -> np.ndarray:
    """[L, ...] numpy on the CPU from each layer's accumulator, in layer order."""
    return np.stack([layers[layer].cpu().numpy() for layer in sorted(layers)])


class MosaicTiles:
    """The tiles of each pooling, float32 [H, rows, cols] a layer; `result()` {pooling: [L, H, rows, cols]}."""

    def __init__(self, poolings: dict[str, Pooling]) -> None:
        self.poolings = poolings
        self.layers: dict[int, dict[str, torch.Tensor]] = {}
        self._constants: dict[torch.device, dict] = {}
        self._row_cache: dict[tuple, tuple] = {}  # (device, r0, rows) -> _row_weights

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        self.layers[layer] = {name: torch.zeros(n_heads, p.n_rows, p.n_cols, dtype=torch.float32, device=device)
                              for name, p in self.poolings.items()}

    def add(self, layer: int, block: Block) -> None:
        """Every pooling's tiles[:, a, b] += sum over the block's rows i of cell a of weight_i * (sum over columns
        j of cell b of p_ij): the rows of all poolings at once (one [H, cells + 1, R] @ [H, R, C] matmul, each row
        weight divided by the row's weight on the columns kept where the pooling renormalises), then the columns
        of each pooling's few row cells. The matmul's last row, of ones, gives the block's column sums."""
        p, c0, tiles = block.probs, block.c0, self.layers[layer]
        h, r, c = p.shape
        const = self._on(p.device)
        weights, parts = self._row_weights(const, block.r0, r, p.device)  # cells + 1, R; (name, rows, lo, hi) each
        weights = weights.expand(h, -1, -1)  # H, cells + 1, R
        renormalised = [part for part in parts if const[part[0]]["renormalise"]]
        if renormalised:
            weights = weights.clone()
            kept_by = {}
            for name, rows, _, _ in renormalised:
                kept = const[name]["kept"]  # S: the columns this pooling renormalises over
                if id(kept) not in kept_by:  # views sharing their columns share the sums
                    kept_by[id(kept)] = _row_share(p, kept[c0 : c0 + c])
                weights[:, rows] *= _inverse(kept_by[id(kept)])[:, None, :]
        pooled = torch.bmm(weights, p)  # H, cells + 1, C
        for name, rows, lo, hi in parts:
            tiles[name][:, lo : hi + 1] += pooled[:, rows] @ const[name]["cols"][c0 : c0 + c]
        block.share(COLUMN_SUMS, lambda: pooled[:, -1])  # H, C: what column_sums gives the profile

    def _on(self, device: torch.device) -> dict:
        """Each pooling's constants as tensors on `device`, made once per device (a split model's layers)."""
        made = self._constants.get(device)
        if made is None:
            made = {}
            norms: dict[bytes, torch.Tensor] = {}  # one tensor for equal columns: their row sums are made once
            for name, p in self.poolings.items():
                cols = np.zeros((p.col_cell.size, p.n_cols), np.float32)  # S, cells: one-hot
                kept = p.col_cell >= 0
                cols[np.flatnonzero(kept), p.col_cell[kept]] = 1.0
                norm = kept if p.norm_cols is None else np.asarray(p.norm_cols, bool)
                made[name] = {
                    "cols": torch.from_numpy(cols).to(device),
                    "kept": norms.setdefault(norm.tobytes(), torch.from_numpy(norm.astype(np.float32)).to(device)),
                    "cell": torch.from_numpy(p.row_cell).to(device),
                    "weight": torch.from_numpy(p.row_weight.astype(np.float32)).to(device),
                    "renormalise": p.renormalise,
                }
            self._constants[device] = made
        return made

    def _row_weights(self, const, r0: int, r: int, device):
        """The row weights for rows r0:r0 + r ([cells + 1, R]: a row for each tile row of each pooling there,
        stacked, and a row of ones last) and where each pooling's are: the same for every layer, so made once a
        block."""
        key = (device, r0, r)
        made = self._row_cache.get(key)
        if made is None:
            blocks, parts, at = [], [], 0
            for name, pooling in const.items():
                cell = pooling["cell"][r0 : r0 + r]
                present = cell[cell >= 0]
                if present.numel() == 0:
                    continue
                lo, hi = int(present.min()), int(present.max())
                one_hot = (cell[None, :] == torch.arange(lo, hi + 1, device=device)[:, None]).float()  # cells, R
                blocks.append(one_hot * pooling["weight"][r0 : r0 + r][None, :])
                parts.append((name, slice(at, at + hi + 1 - lo), lo, hi))
                at += hi + 1 - lo
            blocks.append(torch.ones(1, r, device=device))
            made = self._row_cache[key] = (torch.cat(blocks), parts)
        return made

    def result(self) -> dict[str, np.ndarray]:
        return {name: stacked({layer: tiles[name] for layer, tiles in self.layers.items()}) for name in self.poolings}


class HeadProfileSums:
    """The head profile's sums over rows, float64 [H] a layer each; `special`, `punctuation` [T] bool are its token
    classes. `result()`: {statistic: [L, H] float64}, the means over rows of analysis.profile, and
    "sink_mass_max" (the most sink mass of one row)."""

    def __init__(self, special, punctuation) -> None:
        self.special, self.punctuation = np.asarray(special, bool), np.asarray(punctuation, bool)
        self.layers: dict[int, dict[str, torch.Tensor]] = {}
        self._classes: dict[torch.device, torch.Tensor] = {}  # S, 2 float32: special, punctuation
        self.n_rows = self.special.size

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        self.n_rows = n_rows
        self.layers[layer] = {name: torch.zeros(n_heads, dtype=torch.float64, device=device)
                              for name in (*STATISTICS, "sink_mass_max")}

    def add(self, layer: int, block: Block) -> None:
        """Add one block's rows; its scores, when given, make the entropy without a logarithm a probability
        (`_entropy`), and are overwritten."""
        p, r0, c0, acc = block.probs, block.r0, block.c0, self.layers[layer]
        c = p.shape[-1]

        def add(name, per_row):  # per-row values [H, R], summed over rows in float64
            acc[name] += per_row.double().sum(-1)

        total = p.sum(-1)  # H, R
        top = row_maximum(block)  # H, R
        sink = (1.0 - total.double()).clamp_min(0.0)
        add("sink_mass", sink)
        acc["sink_mass_max"] = torch.maximum(acc["sink_mass_max"], sink.max(-1).values)  # the most of one row
        add("entropy", _entropy(p, block.scores, top, first_maximum(block), total))
        add("mean_distance", _mean_distance(p, r0, c0))
        columns = column_sums(block)  # H, C
        shares = columns @ self._on(p.device)[c0 : c0 + c]  # H, 2
        acc["special"] += shares[:, 0].double()
        acc["punctuation"] += shares[:, 1].double()
        if c0 == 0:
            acc["first"] += columns[:, 0].double()
        for name, offset in (("previous", -1), ("next", 1), ("self", 0)):
            acc[name] += _diagonal(p, r0 + offset - c0).double().sum(-1)
        add("confidence", top)

    def _on(self, device: torch.device) -> torch.Tensor:
        """The token classes [S, 2] float32 on `device`, made once per device."""
        made = self._classes.get(device)
        if made is None:
            classes = np.stack([self.special, self.punctuation], axis=1).astype(np.float32)  # S, 2
            made = self._classes[device] = torch.from_numpy(classes).to(device)
        return made

    def result(self) -> dict[str, np.ndarray]:
        n = self.n_rows
        divide = {name: n for name in STATISTICS} | {"previous": n - 1, "next": n - 1}
        stats = {}
        for name in STATISTICS:
            sums = stacked({layer: acc[name] for layer, acc in self.layers.items()})
            stats[name] = sums / divide[name] if divide[name] else np.full(sums.shape, np.nan)
        stats["sink_mass_max"] = stacked({layer: acc["sink_mass_max"] for layer, acc in self.layers.items()})
        return stats


class RowArgmax:
    """Each row's first strongest key, int32 [H, T] a layer; `result()` [L, H, T]."""

    def __init__(self) -> None:
        self.layers: dict[int, torch.Tensor] = {}

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        self.layers[layer] = torch.zeros(n_heads, n_rows, dtype=torch.int32, device=device)

    def add(self, layer: int, block: Block) -> None:
        r = block.probs.shape[1]
        self.layers[layer][:, block.r0 : block.r0 + r] = (first_maximum(block) + block.c0).int()

    def result(self) -> np.ndarray:
        return stacked(self.layers)


def _entropy(p, scores, top, where, total) -> torch.Tensor:
    """-sum_j p_ij log p_ij [H, R]. From the scores s [H, R, C] the probabilities are the softmax of, log p_ij =
    (s_ij - s_it) + log p_it for any column t of the row (its maximum here): one subtraction and one product a
    probability, where a logarithm of each costs several times more. Without scores: torch's xlogy."""
    if scores is None:
        return -torch.special.xlogy(p, p).sum(-1)
    s = scores if scores.dtype == torch.float32 else scores.float()  # H, R, C
    s -= s.gather(-1, where[..., None])  # s_ij - s_it: 0 at the maximum, finite where blocked (p is 0 there)
    return -torch.linalg.vecdot(p, s) - torch.special.xlogy(total, top)


def _mean_distance(p: torch.Tensor, r0: int, c0: int) -> torch.Tensor:
    """sum_j p_ij |i - j| [H, R] for rows r0.. and columns c0.. of a block p [H, R, C], with no [R, C] table
    of distances for the columns left of the block's rows (all a causal block's but its diagonal part) nor
    right of them: there |i - j| = (ramp from the rows' edge) + (the row's distance to that edge), two sums of
    terms >= 0 (a matrix-vector product and a row sum), so float32 loses nothing to cancellation. The columns
    beside the rows are multiplied by their distances."""
    h, r, c = p.shape
    rows = torch.arange(r0, r0 + r, device=p.device, dtype=torch.float32)  # R
    out = torch.zeros(h, r, device=p.device)
    left = min(r0, c0 + c) - c0  # columns c0 .. r0 (before every row)
    if left > 0:
        part = p[..., :left]  # H, R, left
        ramp = r0 - torch.arange(c0, c0 + left, device=p.device, dtype=torch.float32)  # r0 - j >= 1
        out += part @ ramp + (rows - r0) * part.sum(-1)
    right = max(r0 + r, c0)  # columns r0 + r .. c0 + c (after every row)
    if right < c0 + c:
        part = p[..., right - c0 :]
        ramp = torch.arange(right, c0 + c, device=p.device, dtype=torch.float32) - (r0 + r - 1)  # j - last >= 1
        out += part @ ramp + ((r0 + r - 1) - rows) * part.sum(-1)
    n0, n1 = max(r0, c0), min(r0 + r, c0 + c)  # the columns beside the rows
    if n1 > n0:
        cols = torch.arange(n0, n1, device=p.device, dtype=torch.float32)
        out += torch.linalg.vecdot(p[..., n0 - c0 : n1 - c0], (rows[:, None] - cols[None, :]).abs_())
    return out


def _diagonal(p: torch.Tensor, offset: int) -> torch.Tensor:
    """p[:, i, i + offset] for the rows whose column i + offset is in the block [H, n] (n may be 0): the weight
    of row r0 + i on key r0 + i + k when offset = r0 + k - c0 (previous k = -1, self 0, next 1)."""
    return torch.diagonal(p, offset=offset, dim1=-2, dim2=-1)


def _row_share(p: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """Each row's weight on some columns [H, R]: p [H, R, C] times a 0/1 vector [C] (a matrix-vector product)."""
    h, r, c = p.shape
    return (p.reshape(h * r, c) @ columns).view(h, r)


def _inverse(kept: torch.Tensor) -> torch.Tensor:
    """1 / x, 0 where x is 0 (a row with no weight on the columns kept adds nothing)."""
    return torch.where(kept > 0, 1.0 / kept, torch.zeros((), device=kept.device))
