"""Views computed as the forward pass runs: a `Reducer` passed as `record=` keeps reductions of each layer's
attention probabilities, never the probabilities themselves.

A full trace holds [L, H, T, T] probabilities: 18 GB in float32 for SmolLM2 at 4,096 tokens. The views need
far less. The Reducer's layer records name the "rows" kernel (attention.row_blocks), which computes scores and
softmax one block at a time, over the keys that block may see (a causal block none after its last row), and
hands each block to `reduce`, on the device where the layer runs. In one pass over the block it adds:

- the pooled mosaic tiles of each `Pooling` (the token view; the token view with special tokens hidden and
  rows renormalised; the word view), equal to attnviz.plots.pooling.pool_tiles of that view's full map;
- the head profile sums of attnviz.analysis.profile (entropy, mean distance, special / first / punctuation
  shares, previous / next / self, confidence, sink mass) and each row's argmax (for the positional offset);

and it keeps each layer's queries and keys (float16 by default) so that one head's map over a window of
rows can be recomputed exactly (attnviz.trace.ReducedTrace.head_window). What is held grows with T (queries,
keys, argmax), apart from the tiles, whose size is fixed; the transient is one block, [B, H, rows, S].
Shape legend: H query heads, T query positions, S key positions, R rows of a block, C its columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

CHUNK_ROWS = 256
STATISTICS = ("entropy", "mean_distance", "special", "first", "punctuation", "previous", "next", "self",
              "confidence", "sink_mass")


def pool_edges(n: int, cells: int) -> np.ndarray:
    """attnviz.plots.pooling.pool_edges (this layer imports no other): `min(n, cells)` near-equal blocks."""
    m = min(n, cells)
    return (np.arange(m + 1) * n) // m


@dataclass(frozen=True)
class Pooling:
    """How one view pools token attention into tiles: row i, times `row_weight[i]`, adds into tile row
    `row_cell[i]`, and its column j into tile column `col_cell[j]`; a cell of -1 leaves the token out.
    `renormalise`: each row is first divided by its weight on the columns kept (0 when it has none), as the
    token view with special tokens hidden does; or on `norm_cols` when given (the word view with the first
    token set aside renormalises over every column but the first, words or not)."""

    row_cell: np.ndarray  # [T] int
    row_weight: np.ndarray  # [T] float64
    col_cell: np.ndarray  # [S] int
    n_rows: int
    n_cols: int
    renormalise: bool = False
    norm_cols: np.ndarray | None = None  # [S] bool: the columns a row is renormalised over (default: those kept)


def _cells(n: int, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of n items' cell, and each cell's size."""
    edges = pool_edges(n, cells)
    sizes = np.diff(edges)
    return np.repeat(np.arange(len(sizes)), sizes), sizes


def token_pooling(n: int, cells: int) -> Pooling:
    """pool_tiles of the token view: the mean over a block's rows of the sum over its columns."""
    cell, sizes = _cells(n, cells)
    return Pooling(cell, 1.0 / sizes[cell], cell, len(sizes), len(sizes))


def hidden_special_pooling(special: np.ndarray, cells: int) -> Pooling:
    """pool_tiles of attention_view(hide_special=True): special rows and columns dropped, rows renormalised."""
    keep = np.flatnonzero(~special)
    cell, sizes = _cells(keep.size, cells)
    row_cell = np.full(special.size, -1)
    row_cell[keep] = cell
    weight = np.zeros(special.size)
    weight[keep] = 1.0 / sizes[cell]
    return Pooling(row_cell, weight, row_cell, len(sizes), len(sizes), renormalise=True)


def word_pooling(word_of_token, cells: int) -> Pooling:
    """pool_tiles of attention_view(level="word"): the words that kept a token, each word's row the mean over
    its tokens of the sum over the column word's tokens (analysis.scoring.word_attention_matrix)."""
    kept = sorted({w for w in word_of_token if w is not None})
    index = {w: k for k, w in enumerate(kept)}
    word = np.asarray([-1 if w is None else index[w] for w in word_of_token])
    counts = np.bincount(word[word >= 0], minlength=len(kept))
    cell_of_word, sizes = _cells(len(kept), cells)
    row_cell = np.where(word >= 0, cell_of_word[np.maximum(word, 0)], -1)
    weight = np.where(word >= 0, 1.0 / (counts[np.maximum(word, 0)] * sizes[cell_of_word[np.maximum(word, 0)]]), 0)
    return Pooling(row_cell, weight, row_cell, len(sizes), len(sizes))


def first_aside_word_pooling(word_of_token, cells: int) -> Pooling:
    """pool_tiles of the word view with the first token set aside (analysis.sink.trace_first_aside): rows
    renormalised over every column but the first, and the first token in no word."""
    pooling = word_pooling([None, *word_of_token[1:]], cells)
    norm_cols = np.ones(len(word_of_token), dtype=bool)
    norm_cols[0] = False
    return dataclasses.replace(pooling, renormalise=True, norm_cols=norm_cols)


def view_poolings(n: int, cells: int, special: np.ndarray, word_of_token, first_aside: bool = False
                  ) -> dict[str, Pooling]:
    """The poolings the Explore page's options need: "token", "token_hide_special" (when there are special
    tokens and a real one), "word" (when a token has a word); with `first_aside` (a decoder's), the same
    views with the first token set aside, named with "_first_aside" (the token view then hides position 0,
    and the real special tokens only in "token_hide_special_first_aside")."""
    special = np.asarray(special, bool)
    poolings = {"token": token_pooling(n, cells)}
    if special.any() and not special.all():
        poolings["token_hide_special"] = hidden_special_pooling(special, cells)
    has_words = any(w is not None for w in word_of_token)
    if has_words:
        poolings["word"] = word_pooling(word_of_token, cells)
    if first_aside and n > 1:
        first = np.zeros(n, dtype=bool)
        first[0] = True
        poolings["token_first_aside"] = hidden_special_pooling(first, cells)
        if (special & ~first).any() and not (special | first).all():
            poolings["token_hide_special_first_aside"] = hidden_special_pooling(special | first, cells)
        if any(w is not None for w in word_of_token[1:]):
            poolings["word_first_aside"] = first_aside_word_pooling(list(word_of_token), cells)
    return poolings


ARGMAX_CHUNK = 64


def _first_index(p: torch.Tensor) -> torch.Tensor:
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


class Reducer:
    """A record (attnviz.transformer.record's interface) that reduces each layer's probabilities block by
    block. One sequence (batch 1). `special`, `punctuation` [T] bool are the profile's token classes.

    >>> reducer = Reducer(special, punctuation, view_poolings(T, 34, special, word_of_token))
    >>> module(ids, record=reducer); result = reducer.result()
    """

    names = frozenset({"queries", "keys"})

    def __init__(self, special, punctuation, poolings: dict[str, Pooling], chunk_rows: int = CHUNK_ROWS,
                 keep_dtype: torch.dtype = torch.float16, progress=None) -> None:
        self.special, self.punctuation = np.asarray(special, bool), np.asarray(punctuation, bool)
        self.poolings, self.rows, self.keep_dtype = poolings, chunk_rows, keep_dtype
        self.progress = progress  # called with (layer, n_layers) as each layer's last block is reduced
        self.n_tokens = self.special.size
        self._constants: dict[torch.device, dict] = {}
        self._row_cache: dict[tuple, tuple] = {}  # (device, r0, rows) -> _row_weights
        self.begin(0)

    def begin(self, n_layers: int) -> None:
        self.n_layers = n_layers
        self.layers: list[dict[str, torch.Tensor]] = [{} for _ in range(n_layers)]
        # "queries" [L, H, T, D], "keys" [L, K, S, D] on the CPU in keep_dtype, made at the first layer's and
        # filled a layer at a time: a stack at the end would hold them twice (160 MB more at 3,100 SmolLM2 tokens)
        self.kept: dict[str, torch.Tensor] = {}

    def at(self, layer: int) -> _LayerReducer:
        return _LayerReducer(self, layer)

    def _on(self, device: torch.device) -> dict:
        """The per-token constants as tensors on `device`, made once per device (a split model's layers)."""
        made = self._constants.get(device)
        if made is None:
            classes = np.stack([self.special, self.punctuation], axis=1).astype(np.float32)  # S, 2
            made = {"classes": torch.from_numpy(classes).to(device), "poolings": {}}
            norms: dict[bytes, torch.Tensor] = {}  # one tensor for equal columns: their row sums are made once
            for name, p in self.poolings.items():
                cols = np.zeros((p.col_cell.size, p.n_cols), np.float32)  # S, cells: one-hot
                kept = p.col_cell >= 0
                cols[np.flatnonzero(kept), p.col_cell[kept]] = 1.0
                norm = kept if p.norm_cols is None else np.asarray(p.norm_cols, bool)
                made["poolings"][name] = {
                    "cols": torch.from_numpy(cols).to(device),
                    "kept": norms.setdefault(norm.tobytes(), torch.from_numpy(norm.astype(np.float32)).to(device)),
                    "cell": torch.from_numpy(p.row_cell).to(device),
                    "weight": torch.from_numpy(p.row_weight.astype(np.float32)).to(device),
                    "renormalise": p.renormalise,
                }
            self._constants[device] = made
        return made

    def _accumulators(self, layer: int, n_heads: int, device) -> dict[str, torch.Tensor]:
        acc = self.layers[layer]
        if not acc:
            for name in STATISTICS:
                acc[name] = torch.zeros(n_heads, dtype=torch.float64, device=device)
            acc["sink_mass_max"] = torch.zeros(n_heads, dtype=torch.float64, device=device)
            acc["argmax"] = torch.zeros(n_heads, self.n_tokens, dtype=torch.int32, device=device)
            for name, p in self.poolings.items():
                acc["tiles:" + name] = torch.zeros(n_heads, p.n_rows, p.n_cols, dtype=torch.float32, device=device)
        return acc

    def reduce(self, layer: int, probs: torch.Tensor, r0: int, c0: int, scores: torch.Tensor | None = None) -> None:
        """Add one block, probabilities [1, H, R, C] of rows r0.. and columns c0.., to layer `layer`'s sums.
        `scores`: the block's scores the probabilities are the softmax of (overwritten here), which make the
        entropy without a logarithm a probability (`_entropy`)."""
        if probs.shape[0] != 1:
            raise ValueError(f"a Reducer takes one sequence, got a batch of {probs.shape[0]}")
        p = probs[0].float()  # H, R, C
        h, r, c = p.shape
        const = self._on(p.device)
        acc = self._accumulators(layer, h, p.device)

        def add(name, per_row):  # per-row values [H, R], summed over rows in float64
            acc[name] += per_row.double().sum(-1)

        total = p.sum(-1)  # H, R
        top = p.amax(-1)  # H, R
        where = _first_index(p)  # H, R: the first maximum, as numpy's argmax
        sink = (1.0 - total.double()).clamp_min(0.0)
        add("sink_mass", sink)
        acc["sink_mass_max"] = torch.maximum(acc["sink_mass_max"], sink.max(-1).values)  # the most of one row
        add("entropy", _entropy(p, None if scores is None else scores[0], top, where, total))
        add("mean_distance", _mean_distance(p, r0, c0))
        columns = self._pool(acc, const, p, r0, c0)  # H, C: each column's weight summed over the block's rows
        shares = columns @ const["classes"][c0 : c0 + c]  # H, 2
        acc["special"] += shares[:, 0].double()
        acc["punctuation"] += shares[:, 1].double()
        if c0 == 0:
            acc["first"] += columns[:, 0].double()
        for name, offset in (("previous", -1), ("next", 1), ("self", 0)):
            acc[name] += _diagonal(p, r0 + offset - c0).double().sum(-1)
        add("confidence", top)
        acc["argmax"][:, r0 : r0 + r] = (where + c0).int()
        if r0 + r == self.n_tokens and self.progress is not None:
            self.progress(layer, self.n_layers)

    def _pool(self, acc, const, p, r0: int, c0: int) -> torch.Tensor:
        """Every pooling's tiles[:, a, b] += sum over the block's rows i of cell a of weight_i * (sum over columns
        j of cell b of p_ij): the rows of all poolings at once (one [H, cells + 1, R] @ [H, R, C] matmul, each row
        weight divided by the row's weight on the columns kept where the pooling renormalises), then the columns
        of each pooling's few row cells. Returns the last row of that matmul, the block's column sums [H, C]."""
        h, r, c = p.shape
        weights, parts = self._row_weights(const, r0, r, p.device)  # cells + 1, R; (name, cells slice, lo, hi) each
        weights = weights.expand(h, -1, -1)  # H, cells + 1, R
        renormalised = [part for part in parts if const["poolings"][part[0]]["renormalise"]]
        if renormalised:
            weights = weights.clone()
            kept_by = {}
            for name, rows, _, _ in renormalised:
                kept = const["poolings"][name]["kept"]  # S: the columns this pooling renormalises over
                if id(kept) not in kept_by:  # views sharing their columns share the sums
                    kept_by[id(kept)] = _row_share(p, kept[c0 : c0 + c])
                weights[:, rows] *= _inverse(kept_by[id(kept)])[:, None, :]
        pooled = torch.bmm(weights, p)  # H, cells + 1, C
        for name, rows, lo, hi in parts:
            acc["tiles:" + name][:, lo : hi + 1] += pooled[:, rows] @ const["poolings"][name]["cols"][c0 : c0 + c]
        return pooled[:, -1]

    def _row_weights(self, const, r0: int, r: int, device):
        """The row weights for rows r0:r0 + r ([cells + 1, R]: a row for each tile row of each pooling there,
        stacked, and a row of ones last) and where each pooling's are: the same for every layer, so made once a
        block."""
        key = (device, r0, r)
        made = self._row_cache.get(key)
        if made is None:
            blocks, parts, at = [], [], 0
            for name, pooling in const["poolings"].items():
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

    def result(self) -> dict:
        """numpy on the CPU: "statistics" {name: [L, H] float64} (means over rows, as analysis.profile),
        "argmax" [L, H, T] int32, "tiles" {pooling: [L, H, rows, cols] float32}, "queries" [L, H, T, D] and
        "keys" [L, K, S, D] in `keep_dtype`."""
        n = self.n_tokens
        divide = {name: n for name in STATISTICS} | {"previous": n - 1, "next": n - 1}
        stats = {}
        for name in STATISTICS:
            sums = np.stack([layer[name].cpu().numpy() for layer in self.layers])
            stats[name] = sums / divide[name] if divide[name] else np.full(sums.shape, np.nan)
        stats["sink_mass_max"] = np.stack([layer["sink_mass_max"].cpu().numpy() for layer in self.layers])
        return {
            "statistics": stats,
            "argmax": np.stack([layer["argmax"].cpu().numpy() for layer in self.layers]),
            "tiles": {name: np.stack([layer["tiles:" + name].cpu().numpy() for layer in self.layers])
                      for name in self.poolings},
            "queries": self.kept["queries"].numpy(),
            "keys": self.kept["keys"].numpy(),
        }


class _LayerReducer:
    """What one layer's attention reports to: LayerRecord's `wants` and `keep`, and the "rows" kernel
    (attnviz.transformer.attention.row_blocks), which hands `reduce` blocks of `rows` query rows."""

    kernel = "rows"

    def __init__(self, reducer: Reducer, layer: int) -> None:
        self.reducer, self.layer = reducer, layer

    def wants(self, name: str) -> bool:
        return name in Reducer.names

    def keep(self, name: str, tensor: torch.Tensor) -> None:
        if not self.wants(name):
            return
        kept = self.reducer.kept
        if name not in kept:  # batch 1: [H or K, T, D] a layer
            kept[name] = torch.empty((self.reducer.n_layers, *tensor.shape[1:]), dtype=self.reducer.keep_dtype)
        kept[name][self.layer].copy_(tensor[0])  # rounded to keep_dtype (and brought to the CPU) in the copy

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        self.keep(name, tensor)
        return tensor

    @property
    def rows(self) -> int:
        return self.reducer.rows

    def reduce(self, probs: torch.Tensor, r0: int, c0: int, scores: torch.Tensor | None = None) -> None:
        self.reducer.reduce(self.layer, probs, r0, c0, scores)
