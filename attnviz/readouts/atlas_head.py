"""One head of an atlas as the Atlas page's dashboard shows it (issue 37, "Browse"): its sampled examples (HeadVis's
intervals, attnviz.readouts.atlas_examples), its max-activation histogram, its attention mass per |q - k| bin and
its top query and key tokens, read from the atlas's DuckDB file (Samplers.SCHEMA's tables) with SQL for that head
alone, attached read-only.

Why not `Samplers.load`: it reads every head's examples, histograms and state, which a build needs to resume; a
click on one head needs a few rows. MiniLM's 72 heads over the 438 shipped sentences: 20 to 35 ms of CPU a head.

What a read costs: attaching the file read-only to an in-memory DuckDB instance held here (~5 ms of CPU to attach
and detach; a connection of its own, opened and closed, cost 25-35 ms) and the blocks of the examples' list columns
that hold the head's rows, which DuckDB reads and decompresses a vector of 2,048 rows at a time whatever the filter
keeps: small for atlases of short texts (the shipped sentences), about 0.12 s for 270 heads of 512-token examples
keeping 1,024 weights each. An atlas with no examples at all costs one failed query.

An atlas imported from a HeadVis tree (atlas_headvis.import_tree) has examples but may lack the histograms: its
qk-distance mass is then the kept COO's (as HeadVis's own `qk_distance_histogram` is computed), said by
`Histogram.source`. The top tokens are always the kept COO's mass per token text (HeadVis's rule, 50 a side).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.readouts.atlas_examples import N_INTERVALS, QK_DISTANCE_EDGES

TOP_TOKENS = 50  # HeadVis's top query / key tokens, a side


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # held in the shared views store: no caller may change it
    return array


@dataclass(frozen=True)
class HeadExample:
    """One sampled sequence of one head: its tokens and the kept COO (flat `q * seq_len + k`, weights)."""

    sequence_id: int
    interval: int  # 1 lowest ... n_intervals top
    max: float | None  # the sequence's largest weight, position 0 left out (None: a tree without it)
    tokens: tuple[str, ...]
    indices: np.ndarray
    values: np.ndarray
    seq_len: int

    def received(self) -> tuple[np.ndarray, np.ndarray]:
        """(the largest kept weight each position gets as a key, the query it comes from, -1 where none)."""
        queries, keys = np.divmod(self.indices, self.seq_len)
        best = np.zeros(self.seq_len)
        source = np.full(self.seq_len, -1, dtype=np.int64)
        order = np.lexsort((-self.values, keys))  # per key, its largest weight first
        first = np.ones(len(order), dtype=bool)
        first[1:] = keys[order][1:] != keys[order][:-1]
        at = order[first]
        best[keys[at]] = self.values[at]
        source[keys[at]] = queries[at]
        return best, source

    def row(self, query: int) -> np.ndarray:
        """The kept weights of one query row over the keys (0 where a weight was not kept)."""
        queries, keys = np.divmod(self.indices, self.seq_len)
        weights = np.zeros(self.seq_len)
        mine = queries == query
        weights[keys[mine]] = self.values[mine]
        return weights


@dataclass(frozen=True)
class Histogram:
    edges: tuple[float, ...]  # len(values) + 1
    values: tuple[float, ...]
    mean: float | None = None  # the max histogram's mean max over every sequence
    source: str = "corpus"  # "corpus": every sequence's; "examples": the kept COO's only


@dataclass(frozen=True)
class HeadRead:
    layer: int
    head: int
    has_examples: bool  # the atlas has examples at all (False: built without them)
    n_intervals: int
    examples: tuple[HeadExample, ...]  # the top interval first, then lower ones; within one, by max
    max_histogram: Histogram | None
    qk_distance: Histogram | None
    top_query_tokens: tuple[tuple[str, float], ...]
    top_key_tokens: tuple[tuple[str, float], ...]

    def nbytes(self) -> int:
        """Roughly what it holds, for the views store's count."""
        return 2_000 + sum(e.indices.nbytes + e.values.nbytes + sum(len(t) + 50 for t in e.tokens)
                           for e in self.examples)


# The one in-memory DuckDB instance the reads attach an atlas to (read-only), one read at a time: opening and closing
# an instance per read (duckdb.connect(path)) cost 25-35 ms of CPU, an ATTACH and DETACH on a held one 5 ms. Nothing
# stays attached between reads, so a rebuilt or replaced file is read anew and a build may take its write lock.
_READS = threading.Lock()
_instance = None
ALIAS = "head_atlas"
INSTANCE_CONFIG = {"threads": 1, "memory_limit": "512MB"}  # one read a time; its buffers bounded, freed at DETACH


def _attached(database: str | Path):
    global _instance
    import duckdb

    if _instance is None:
        _instance = duckdb.connect(":memory:", config=INSTANCE_CONFIG)
    _instance.execute(f"ATTACH '{str(database).replace(chr(39), chr(39) * 2)}' AS {ALIAS} (READ_ONLY)")
    return _instance


def read_head(database: str | Path, layer: int, head: int) -> HeadRead:
    """Head (`layer`, `head`) of the atlas in the DuckDB file `database` (module docstring)."""
    import duckdb

    with _READS:
        con = _attached(database)
        try:
            try:
                rows = con.execute(
                    f"SELECT e.interval, e.sequence_id, e.max, e.attention_indices, e.attention_values, e.seq_len, "
                    f"s.tokens FROM {ALIAS}.examples e JOIN {ALIAS}.sequences s ON s.id = e.sequence_id "
                    "WHERE e.layer = ? AND e.head = ? ORDER BY e.interval DESC, e.max DESC NULLS LAST, e.position",
                    [layer, head]).fetchall()
            except duckdb.CatalogException:  # no examples table: asked, not listed (a catalog query costs 12 ms)
                return HeadRead(layer, head, False, N_INTERVALS, (), None, None, (), ())
            # Samplers.SCHEMA creates its tables together (a build, an import): with `examples`, these are there
            found = con.execute(f"SELECT n_intervals FROM {ALIAS}.example_settings").fetchall()
            n_intervals = int(found[0][0]) if found else None
            maxes = con.execute(f"SELECT bin_edges, bin_values, max_sum, n_sequences FROM {ALIAS}.max_histogram "
                                "WHERE layer = ? AND head = ?", [layer, head]).fetchall()
            qk = con.execute(f"SELECT bin_edges, bin_values FROM {ALIAS}.qk_distance_mass "
                             "WHERE layer = ? AND head = ?", [layer, head]).fetchall()
        finally:
            con.execute(f"DETACH DATABASE IF EXISTS {ALIAS}")
    examples = tuple(
        HeadExample(int(sid), int(interval), None if value is None else float(value), tuple(tokens),
                    _frozen(np.asarray(indices, dtype=np.int64)), _frozen(np.asarray(values, dtype=np.float64)),
                    int(seq_len))
        for interval, sid, value, indices, values, seq_len, tokens in rows
        if len(tokens) == seq_len)  # a tree's sequence whose tokens do not match its length: not drawable
    if n_intervals is None:  # an imported tree: its intervals as its examples number them
        n_intervals = max([N_INTERVALS, *(e.interval for e in examples)])
    max_histogram = None
    if maxes:
        edges, counts, max_sum, n = maxes[0]
        max_histogram = Histogram(tuple(map(float, edges)), tuple(map(float, counts)),
                                  float(max_sum) / n if n and max_sum is not None else None)
    mass, queries, keys = kept_mass(examples)
    if qk:
        qk_distance = Histogram(tuple(map(float, qk[0][0])), tuple(map(float, qk[0][1])))
    elif examples:
        qk_distance = Histogram(tuple(map(float, QK_DISTANCE_EDGES)), tuple(mass), source="examples")
    else:
        qk_distance = None
    return HeadRead(layer, head, True, n_intervals, examples, max_histogram, qk_distance, top(queries), top(keys))


def kept_mass(examples: Iterable[HeadExample], edges=QK_DISTANCE_EDGES) -> tuple[list[float], dict, dict]:
    """(the kept COO's mass per |q - k| bin of `edges`, its mass per query token text, per key token text), the
    tokens in the order first met (HeadVis's top tokens; ties keep it). Vectorised per sequence: a sequence of
    512 tokens keeps up to 4,096 weights, which one Python step each would spend most of a click's budget on."""
    edges = np.asarray(edges)
    mass = np.zeros(len(edges) - 1)
    sides: tuple[dict[str, float], dict[str, float]] = ({}, {})
    for e in examples:
        if not len(e.indices):
            continue
        queries, keys = np.divmod(e.indices, e.seq_len)
        bins = np.searchsorted(edges, np.abs(queries - keys), side="right") - 1
        inside = (bins >= 0) & (bins < len(mass))
        mass += np.bincount(bins[inside], weights=e.values[inside], minlength=len(mass))
        for positions, side in zip((queries, keys), sides):
            sums = np.bincount(positions, weights=e.values, minlength=e.seq_len)
            seen, first = np.unique(positions, return_index=True)
            for position in seen[np.argsort(first, kind="stable")]:
                token = e.tokens[position]
                side[token] = side.get(token, 0.0) + float(sums[position])
    return mass.tolist(), sides[0], sides[1]


def top(weights: dict[str, float], n: int = TOP_TOKENS) -> tuple[tuple[str, float], ...]:
    """The `n` largest (token, weight), rounded to 4 decimals; ties in the order first met."""
    ranked = sorted(weights.items(), key=lambda item: -item[1])[:n]
    return tuple((token, round(weight, 4)) for token, weight in ranked)


def example_text(tokens: Iterable[str], special: Iterable[str] = ()) -> str:
    """An example's text as a person would type it, from its tokens each decoded alone, `special` ones left out.
    Byte-level and SentencePiece pieces decoded alone keep their spaces (" cat"): joined as they are. WordPiece
    ones do not ("cat", "##s"): words joined by spaces, a "##" piece glued to the one before; re-tokenized, such a
    text gives the same pieces (punctuation is split from words either way)."""
    special = set(special)
    kept = [token for token in tokens if token not in special]
    if any(token[:1].isspace() for token in kept[1:]):
        return "".join(kept).strip()
    text = ""
    for token in kept:
        text += token[2:] if token.startswith("##") and text else (" " if text else "") + token
    return text
