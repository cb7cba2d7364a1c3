"""The head atlas's detector scores (issue 37, item 1: "our detectors"): each head's previous-token, duplicate-token
and induction score on repeated random tokens (attnviz.analysis.detectors, TransformerLens's `detect_head` rule;
`python -m attnviz heads` and the Head Finder give the same numbers for the same settings), computed once per atlas
and kept in its DuckDB file:

- `detector_settings` (one row): `n` (random tokens, repeated once), `sequences`, `seed`, `vocab_size` (the ids
  drawn from, special ids left out), `computed` (ISO time, UTC);
- `detectors`: `layer`, `head`, and one DOUBLE column a detector (analysis.detectors.DETECTORS).

Unlike the six metrics these read a synthetic input, not the corpus: they say what a head does when a pattern is
there to follow (the previous token, an earlier copy, what came after it last time), the metrics how much it does
so on real text. A build asked again with the same settings keeps what is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from attnviz.analysis.detectors import DETECTORS, detect_heads, vocabulary
from attnviz.readouts.atlas_store import insert_rows

# `python -m attnviz heads`' defaults (and the app's Head Finder's): 50 random tokens, repeated, 4 sequences.
N_TOKENS, SEQUENCES, SEED = 50, 4, 0
ATLAS_FILE = "atlas.duckdb"  # attnviz.readouts.atlas.ATLAS_FILE (that module imports this one)
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS detector_settings (n INTEGER, sequences INTEGER, seed BIGINT, vocab_size BIGINT, "
    "computed VARCHAR)",
    "CREATE TABLE IF NOT EXISTS detectors (layer INTEGER, head INTEGER, "
    + ", ".join(f"{name} DOUBLE" for name in DETECTORS) + ")",
)


def _settings(con) -> tuple | None:
    tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "detector_settings" not in tables:
        return None
    row = con.execute("SELECT n, sequences, seed, vocab_size FROM detector_settings").fetchall()
    return tuple(row[0]) if row else None


def build_detectors(model, out_dir: str | Path, n: int = N_TOKENS, sequences: int = SEQUENCES, seed: int = SEED,
                    progress=None) -> dict[str, np.ndarray]:
    """The detectors' [L, H] grids of `model` (a LoadedModel: `run_ids` and `info.max_tokens`) stored in the atlas
    in `out_dir` (which must exist: `atlas build` first), or those stored already for the same settings. `n` is
    cut to half the model's context where that is shorter. `progress(done, total)` after each sequence."""
    import duckdb

    path = Path(out_dir) / ATLAS_FILE
    if not path.is_file():
        raise ValueError(f"{path}: no atlas there (build one with `atlas build`)")
    vocab_size, special = vocabulary(model)
    n = min(n, model.info.max_tokens // 2)  # 2n tokens a sequence: a tiny model's context may be under 100
    if n < 3:  # with n = 2 the induction target is the previous token (analysis.detectors)
        raise ValueError(f"the detectors need 6 tokens a sequence; this model takes {model.info.max_tokens}")
    wanted = (n, sequences, seed, vocab_size)
    con = duckdb.connect(str(path))
    try:
        for statement in SCHEMA:
            con.execute(statement)
        if _settings(con) == wanted:
            return stored_detectors(con)
        scores = detect_heads(model, n=n, sequences=sequences, seed=seed, vocab_size=vocab_size,
                              special_ids=special, progress=progress)
        n_layers, n_heads = scores[DETECTORS[0]].shape
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("DELETE FROM detectors")
            con.execute("DELETE FROM detector_settings")
            con.execute("INSERT INTO detector_settings VALUES (?, ?, ?, ?, ?)",
                        [*wanted, datetime.now(UTC).isoformat(timespec="seconds")])
            insert_rows(con, "detectors", [[layer, head, *(float(scores[name][layer, head]) for name in DETECTORS)]
                                           for layer in range(n_layers) for head in range(n_heads)])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return scores
    finally:
        con.close()


def stored_detectors(con) -> dict[str, np.ndarray] | None:
    """{detector: float64 [L, H]} kept in an open atlas, or None where it has none."""
    if _settings(con) is None:
        return None
    table = con.execute(f"SELECT layer, head, {', '.join(DETECTORS)} FROM detectors").fetchnumpy()
    if not len(table["layer"]):
        return None
    shape = (int(table["layer"].max()) + 1, int(table["head"].max()) + 1)
    grids = {}
    for name in DETECTORS:
        grid = np.full(shape, np.nan)
        grid[table["layer"], table["head"]] = np.asarray(table[name], dtype=np.float64)
        grids[name] = grid
    return grids


def detector_grids(con) -> dict[str, list[list[float | None]]] | None:
    """The stored detectors as `atlas metrics --json` gives them: {detector: [layer][head]}, None where none."""
    grids = stored_detectors(con)
    if grids is None:
        return None
    return {name: [[None if np.isnan(v) else float(v) for v in row] for row in grid] for name, grid in grids.items()}
