"""The head atlas's sink share and causal weight (issue 37, items 1 and 6), as they are kept in the atlas's DuckDB
file (`DIR/atlas.duckdb`) and read back.

Sink share: each head's mean attention on the first token, `attnviz.readouts.sinks.first_token_means`' rule (per
text, the mean over its query rows after the first of the weight on position 0; then the mean over the texts of 2
tokens or more), over the atlas's own texts as the atlas tokenizes and cuts them. It is summed in the metrics'
streaming pass (`atlas_metrics.AtlasSums`, HeadSums.first_token) and kept, with its sum, in the table
`sink_share` (`layer`, `head`, `first_token`: the float64 sum over sequences, `sink_share`: that sum over the
sequences pooled, NULL where none was); `save_sink` and `load_sink` write and resume it in the build's own
transactions. An atlas built before this table existed, resumed, has NaN sums for the texts it had taken: its
sink share stays NULL rather than a share of part of the corpus.

Causal weight: each head's activation-patching effect (denoising: the clean run's head output put into the
corrupted run, normalised so that 0 is the corrupted run and 1 the clean one; attnviz.interventions.patching), the
mean over the usable minimal pairs of a relation. It is computed by attnviz.interventions.atlas_patching (this
layer may not import interventions: docs/layers.md) and stored here, per relation:

- `causal_sources`: `relation`, `pairs` (`builtin`), `sha256` (over the pairs' text: id, clean, corrupt, target,
  contrast), `model`, `n_layers`, `n_heads`, `n_pairs` (pairs averaged), `reason` (why no grid, NULL where one),
  `computed` (ISO time, UTC);
- `causal`: `relation`, `layer`, `head`, `effect` (float64), `n_pairs`;
- `causal_skipped`: `relation`, `pair_id`, `reason` (a pair the model cannot score: a target of several tokens,
  unalignable runs, runs that score the same; or every pair, with the reason, for an encoder or a model without
  an LM head).

A later build given pairs with the same SHA-256 for the same model keeps the stored result (`is_stored`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from attnviz.readouts.atlas_store import insert_rows

ATLAS_FILE = "atlas.duckdb"  # attnviz.readouts.atlas.ATLAS_FILE (that module imports this one)
SINK_SCHEMA = "CREATE TABLE IF NOT EXISTS sink_share (layer INTEGER, head INTEGER, first_token DOUBLE, " \
              "sink_share DOUBLE)"
CAUSAL_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS causal_sources (relation VARCHAR, pairs VARCHAR, sha256 VARCHAR, model VARCHAR,
       n_layers INTEGER, n_heads INTEGER, n_pairs INTEGER, reason VARCHAR, computed VARCHAR)""",
    "CREATE TABLE IF NOT EXISTS causal (relation VARCHAR, layer INTEGER, head INTEGER, effect DOUBLE, "
    "n_pairs INTEGER)",
    "CREATE TABLE IF NOT EXISTS causal_skipped (relation VARCHAR, pair_id VARCHAR, reason VARCHAR)",
)
_CAUSAL_TABLES = ("causal_sources", "causal", "causal_skipped")
# The seed's rows (attnviz.readouts.atlas_relations.SEED keys) that built-in minimal pairs measure, and the
# relation of those pairs (attnviz/probesets/patch_pairs.jsonl).
SEED_PAIRS = {"subject-verb": "subject-verb", "coreference": "coreference"}


def _tables(con) -> set[str]:
    return {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _grid(rows: Iterable, n_layers: int, n_heads: int) -> list[list[float | None]]:
    grid: list[list[float | None]] = [[None] * n_heads for _ in range(n_layers)]
    for layer, head, value in rows:
        if value is not None and not math.isnan(value) and 0 <= layer < n_layers and 0 <= head < n_heads:
            grid[int(layer)][int(head)] = float(value)
    return grid


# ---------------------------------------------------------------------------------------------
# The sink share


def save_sink(con, sums) -> None:
    """The sink share's sums and values of `sums` (a HeadSums), inside the caller's transaction."""
    n_layers, n_heads = sums.shape
    layer, head = (a.ravel() for a in np.indices((n_layers, n_heads)))
    first = np.asarray(sums.first_token, dtype=np.float64).ravel()
    share = first / sums.sequences if sums.sequences else np.full(first.shape, np.nan)
    con.register("sink_in", {"layer": layer, "head": head, "first_token": first, "sink_share": share})
    try:
        con.execute("DELETE FROM sink_share")
        con.execute("INSERT INTO sink_share SELECT layer, head, first_token, "
                    "CASE WHEN isnan(sink_share) THEN NULL ELSE sink_share END FROM sink_in")
    finally:
        con.unregister("sink_in")


def load_sink(con, sums, done: int) -> None:
    """Put the stored sink sums into `sums` (a HeadSums being resumed after `done` texts); NaN where the atlas
    was built, in part, before the sink share was kept."""
    rows = con.execute("SELECT layer, head, first_token FROM sink_share").fetchall() \
        if "sink_share" in _tables(con) else []
    if not rows:
        sums.first_token = np.full(sums.shape, np.nan if done else 0.0)
        return
    first = np.full(sums.shape, np.nan)
    for layer, head, value in rows:
        first[int(layer), int(head)] = np.nan if value is None else value
    sums.first_token = first


def sink_grid(con, n_layers: int, n_heads: int) -> list[list[float | None]]:
    """[layer][head] sink share (None where it has none: no table, no sequence, an older atlas)."""
    if "sink_share" not in _tables(con):
        return [[None] * n_heads for _ in range(n_layers)]
    return _grid(con.execute("SELECT layer, head, sink_share FROM sink_share").fetchall(), n_layers, n_heads)


# ---------------------------------------------------------------------------------------------
# The causal weight


def pairs_sha256(specs: Iterable) -> str:
    """The SHA-256 of minimal pairs' text (each pair's id, clean, corrupt, target and contrast, in order)."""
    digest = hashlib.sha256()
    for spec in specs:
        digest.update(json.dumps([spec.id, spec.clean, spec.corrupt, spec.target, spec.contrast],
                                 ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def is_stored(con, relation: str, sha256: str, info) -> bool:
    """Whether the atlas holds `relation`'s causal result for pairs of this SHA-256 and this model."""
    if not set(_CAUSAL_TABLES) <= _tables(con):
        return False
    row = con.execute("SELECT sha256, model, n_layers, n_heads FROM causal_sources WHERE relation = ?",
                      [relation]).fetchall()
    return bool(row) and tuple(row[0]) == (sha256, info.name, info.n_layers, info.n_heads)


def store_causal(con, relation: str, pairs: str, sha256: str, info, grid: np.ndarray | None, n_pairs: int,
                 skipped: Mapping[str, str], reason: str | None = None) -> None:
    """One relation's result, in place of its earlier one, in one transaction: the mean effect grid [L, H] over
    `n_pairs` pairs (None: no pair usable, `reason` says why), and the pairs left out with their reasons."""
    for statement in CAUSAL_SCHEMA:
        con.execute(statement)
    con.execute("BEGIN TRANSACTION")
    try:
        for name in _CAUSAL_TABLES:
            con.execute(f"DELETE FROM {name} WHERE relation = ?", [relation])
        if grid is not None:
            grid = np.asarray(grid, dtype=np.float64)
            layer, head = (a.ravel() for a in np.indices(grid.shape))
            insert_rows(con, "causal", [[relation, int(lay), int(hd), float(v), int(n_pairs)]
                                        for lay, hd, v in zip(layer, head, grid.ravel())])
        insert_rows(con, "causal_skipped", [[relation, str(pid), str(why)] for pid, why in skipped.items()])
        con.execute("INSERT INTO causal_sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [relation, pairs, sha256, info.name, info.n_layers, info.n_heads, int(n_pairs), reason, _now()])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def stored_causal(con) -> dict:
    """{relation: {"grid": [layer][head] or None, "n_pairs", "skipped": {pair id: reason}, "pairs", "sha256",
    "reason"}} from an open connection; {} where none was built."""
    if not set(_CAUSAL_TABLES) <= _tables(con):
        return {}
    found = {}
    for relation, pairs, sha, n_layers, n_heads, n_pairs, reason in con.execute(
            "SELECT relation, pairs, sha256, n_layers, n_heads, n_pairs, reason FROM causal_sources "
            "ORDER BY relation").fetchall():
        rows = con.execute("SELECT layer, head, effect FROM causal WHERE relation = ?", [relation]).fetchall()
        skipped = con.execute("SELECT pair_id, reason FROM causal_skipped WHERE relation = ? ORDER BY pair_id",
                              [relation]).fetchall()
        found[relation] = {"grid": _grid(rows, n_layers, n_heads) if rows else None, "n_pairs": int(n_pairs),
                           "skipped": dict(skipped), "pairs": pairs, "sha256": sha, "reason": reason}
    return found


def causal(path: str | Path) -> dict:
    """`stored_causal` of the atlas database at `path` (a file, or its folder), opened read-only; {} when none."""
    import duckdb

    path = Path(path)
    path = path / ATLAS_FILE if path.is_dir() else path
    if not path.is_file():
        return {}
    con = duckdb.connect(str(path), read_only=True)
    try:
        return stored_causal(con)
    finally:
        con.close()


def seed_causal(found: Mapping, key: str, best: Mapping | None) -> tuple[dict | None, str | None]:
    """(the causal weight of a seed row's best head, None with the reason): {"effect", "relation", "n_pairs"}
    from the atlas's "causal" ({relation: {"grid", ...}}) for the seed row `key`, `best` its {layer, head}."""
    relation = SEED_PAIRS.get(key)
    if relation is None:
        return None, f"no minimal pairs measure {key} (built-in pairs: {', '.join(SEED_PAIRS)})"
    entry = (found or {}).get(relation)
    if not isinstance(entry, Mapping):
        return None, "no causal weight in this atlas: build it with --pairs builtin (a decoder with an LM head)"
    grid = entry.get("grid")
    if grid is None:
        return None, entry.get("reason") or f"none of the {relation} pairs could be patched"
    if best is None:
        return None, "no best head for this relation"
    try:
        effect = grid[best["layer"]][best["head"]]
    except (IndexError, KeyError, TypeError):
        return None, "the best head is outside the causal grid"
    return {"effect": effect, "relation": relation, "n_pairs": entry.get("n_pairs")}, None
