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
    """[H, R]: each row's largest probability (the maximum of its chunks' maxima, which `first_maximum` reads
    too: one pass over the block for both)."""
    return block.share("row_maximum", lambda: chunk_maxima(block).amax(-1))


def first_maximum(block: Block) -> torch.Tensor:
    """[H, R] int64: the block column of each row's first maximum, as numpy's argmax."""
    return block.share("first_maximum", lambda: first_index(block.probs, chunk_maxima(block)))


def chunk_maxima(block: Block) -> torch.Tensor:
    """[H, R, n]: the maximum of each row's chunks of ARGMAX_CHUNK columns (the last chunk may be shorter); one
    chunk, the whole row, where a row has fewer than two chunks."""
    return block.share("chunk_maxima", lambda: _chunk_maxima(block.probs))


def _chunk_maxima(p: torch.Tensor) -> torch.Tensor:
    c = p.shape[-1]
    n = c // ARGMAX_CHUNK
    if n < 2:
        return p.amax(-1, keepdim=True)
    chunks = p[..., : n * ARGMAX_CHUNK].unflatten(-1, (n, ARGMAX_CHUNK)).amax(-1)  # H, R, n
    if c > n * ARGMAX_CHUNK:
        chunks = torch.cat((chunks, p[..., n * ARGMAX_CHUNK :].amax(-1, keepdim=True)), dim=-1)  # H, R, n + 1
    return chunks


def column_sums(block: Block) -> torch.Tensor:
    """[H, C]: each column's weight summed over the block's rows. MosaicTiles, run first, leaves them from its
    matmul (a row of ones there costs nothing): the same float32 sums whichever reduction asks."""
    return block.share(COLUMN_SUMS, lambda: block.probs.sum(-2))


def first_index(p: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
    """[H, R] int64: each row's first column holding its maximum (numpy's argmax), without torch's indexed
    reduction over every column (several times slower than a plain maximum): from the maximum of each chunk of
    ARGMAX_CHUNK columns (`chunks`, `_chunk_maxima` of p), the first chunk that holds the row's maximum, the first
    maximum inside it."""
    c = p.shape[-1]
    if c // ARGMAX_CHUNK < 2:
        return p.argmax(-1)
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
        self._kept: dict[torch.device, tuple] = {}  # device -> _kept_sets

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
            kept, set_of = self._kept_sets(const, p.device)  # m, S: the columns each pooling keeps
            shares = _row_products(p, kept[:, c0 : c0 + c])  # m, H, R: each row's weight on each set
            for name, rows, _, _ in renormalised:
                weights[:, rows] *= _inverse(shares[set_of[name]])[:, None, :]
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

    def _kept_sets(self, const, device) -> tuple[torch.Tensor, dict[str, int]]:
        """[m, S] float32: the sets of columns the renormalising poolings renormalise over, 0/1, one row each set
        (views sharing their columns share it), and each such pooling's row there; made once per device, asked only
        where some pooling renormalises (m >= 1)."""
        made = self._kept.get(device)
        if made is None:
            sets, set_of = [], {}
            for name, pooling in const.items():
                if pooling["renormalise"]:
                    at = next((k for k, kept in enumerate(sets) if kept is pooling["kept"]), len(sets))
                    if at == len(sets):
                        sets.append(pooling["kept"])
                    set_of[name] = at
            made = self._kept[device] = (torch.stack(sets), set_of)
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
        self._distances: dict[tuple, tuple] = {}  # a block shape's distance_weights
        self.n_rows = self.special.size

    def start(self, layer: int, n_heads: int, n_rows: int, device: torch.device) -> None:
        self.n_rows = n_rows
        self.layers[layer] = {name: torch.zeros(n_heads, dtype=torch.float64, device=device)
                              for name in (*STATISTICS, "sink_mass_max")}

    def add(self, layer: int, block: Block) -> None:
        """Add one block's rows; its scores, when given, make the entropy without a logarithm a probability
        (`_entropy`), and are overwritten."""
        p, r0, c0, acc = block.probs, block.r0, block.c0, self.layers[layer]
        _, r, c = p.shape

        def add(name, per_row):  # per-row values [H, R], summed over rows in float64
            acc[name] += per_row.double().sum(-1)

        # each row's total and its distance sums (`distance_weights`) from one pass over the block
        weights, sides = self._distance_weights(r0, c0, r, c, p.device)
        sums = _row_products(p, weights)  # 1 + 2 per side, H, R
        total = sums[0]  # H, R
        top = row_maximum(block)  # H, R
        sink = (1.0 - total.double()).clamp_min(0.0)
        add("sink_mass", sink)
        acc["sink_mass_max"] = torch.maximum(acc["sink_mass_max"], sink.max(-1).values)  # the most of one row
        add("entropy", _entropy(p, block.scores, top, first_maximum(block), total))
        add("mean_distance", _mean_distance(p, r0, c0, dict(zip(sides, sums[1:].unflatten(0, (-1, 2))))))
        columns = column_sums(block)  # H, C
        shares = columns @ self._on(p.device)[c0 : c0 + c]  # H, 2
        acc["special"] += shares[:, 0].double()
        acc["punctuation"] += shares[:, 1].double()
        if c0 == 0:
            acc["first"] += columns[:, 0].double()
        for name, offset in (("previous", -1), ("next", 1), ("self", 0)):
            acc[name] += _diagonal(p, r0 + offset - c0).double().sum(-1)
        add("confidence", top)

    def _distance_weights(self, r0: int, c0: int, r: int, c: int, device: torch.device) -> tuple:
        """`distance_weights` of a block shape, made once for every layer."""
        key = (r0, c0, r, c, device)
        made = self._distances.get(key)
        if made is None:
            made = self._distances[key] = distance_weights(r0, c0, r, c, device)
        return made

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
    probability, where a logarithm of each costs several times more, both written over the scores (the
    reductions' to overwrite: no [H, R, C] temporary). Without scores: torch's xlogy."""
    if scores is None:
        return -torch.special.xlogy(p, p).sum(-1)
    s = scores if scores.dtype == torch.float32 else scores.float()  # H, R, C
    # p_ij (s_ij - s_it): s_ij - s_it is 0 at the maximum, finite where blocked (p is 0 there)
    s.sub_(s.gather(-1, where[..., None])).mul_(p)
    return -s.sum(-1) - torch.special.xlogy(total, top)


def distance_weights(r0: int, c0: int, r: int, c: int, device) -> tuple[torch.Tensor, tuple[str, ...]]:
    """The column weights [m, C] float32 whose products with the rows of a block (rows r0.., columns c0..) give
    each row's total (ones, first) and what `_mean_distance` needs of the sides of the block that have columns:
    "left" of every row (c0 .. r0: 1 and r0 - j >= 1; every causal block but the first), "right" of every row
    (r0 + r .. c0 + c: 1 and j - (r0 + r - 1) >= 1; an encoder's); 0 elsewhere. And those sides, in order."""
    j = torch.arange(c0, c0 + c, dtype=torch.float32)
    rows, sides = [torch.ones(c)], []
    for side, inside, ramp in (("left", j < r0, r0 - j), ("right", j > r0 + r - 1, j - (r0 + r - 1))):
        if bool(inside.any()):
            rows += [inside.float(), torch.where(inside, ramp, 0.0)]
            sides.append(side)
    return torch.stack(rows).to(device), tuple(sides)


def _mean_distance(p: torch.Tensor, r0: int, c0: int, sides: dict[str, torch.Tensor]) -> torch.Tensor:
    """sum_j p_ij |i - j| [H, R] for rows r0.. and columns c0.. of a block p [H, R, C], with no [R, C] table
    of distances for the columns left of the block's rows (all a causal block's but its diagonal part) nor
    right of them: there |i - j| = (ramp from the rows' edge) + (the row's distance to that edge), sums of terms
    >= 0 (`sides`: "left" and "right", each [2, H, R], each row's products with `distance_weights`' two rows
    of that side, made in one pass with the totals), so float32 loses nothing to cancellation. The columns
    beside the rows are multiplied by their distances."""
    h, r, c = p.shape
    rows = torch.arange(r0, r0 + r, device=p.device, dtype=torch.float32)  # R
    out = torch.zeros(h, r, device=p.device)
    if "left" in sides:
        weight, ramp = sides["left"]
        out += ramp + (rows - r0) * weight
    if "right" in sides:
        weight, ramp = sides["right"]
        out += ramp + ((r0 + r - 1) - rows) * weight
    n0, n1 = max(r0, c0), min(r0 + r, c0 + c)  # the columns beside the rows
    if n1 > n0:
        cols = torch.arange(n0, n1, device=p.device, dtype=torch.float32)
        out += torch.linalg.vecdot(p[..., n0 - c0 : n1 - c0], (rows[:, None] - cols[None, :]).abs_())
    return out


def _diagonal(p: torch.Tensor, offset: int) -> torch.Tensor:
    """p[:, i, i + offset] for the rows whose column i + offset is in the block [H, n] (n may be 0): the weight
    of row r0 + i on key r0 + i + k when offset = r0 + k - c0 (previous k = -1, self 0, next 1)."""
    return torch.diagonal(p, offset=offset, dim1=-2, dim2=-1)


def _row_products(p: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """[m, H, R]: each row of p [H, R, C] times each row of `weights` [m, C], in one matrix product: one pass over
    p for up to three (where a row sum or a matrix-vector product each is one; as weights @ p^T, which MKL runs
    in one pass for m <= 3 where p @ weights^T takes two from m = 2)."""
    h, r, c = p.shape
    return (weights @ p.reshape(h * r, c).T).view(-1, h, r)


def _inverse(kept: torch.Tensor) -> torch.Tensor:
    """1 / x, 0 where x is 0 (a row with no weight on the columns kept adds nothing)."""
    return torch.where(kept > 0, 1.0 / kept, torch.zeros((), device=kept.device))
