"""The atlas's DuckDB file as tables: rows into a table at once (attnviz.readouts.atlas and the modules that store
beside it), and every table out as Parquet."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def insert_rows(con, table: str, rows: list[list]) -> None:
    """`rows` into `table` (its columns in order) as one Arrow table DuckDB reads at once: `executemany` runs one
    statement a row, which took 28 s of a 64-text build's 53 (benchmarks/bench_atlas_headvis.py). A list column may
    be given as 1-D numpy arrays (`_column`)."""
    if not rows:
        return
    import pyarrow

    names = [row[1] for row in con.execute(f"PRAGMA table_info('{table}')").fetchall()]
    batch = pyarrow.Table.from_pydict({name: _column(pyarrow, [row[i] for row in rows])
                                       for i, name in enumerate(names)})
    con.register("_atlas_rows", batch)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM _atlas_rows")
    finally:
        con.unregister("_atlas_rows")


def _column(pyarrow, values: list):
    """A column's values as Arrow takes them; a list column given as 1-D numpy arrays (an example's attention
    indices and values) as one ListArray over their concatenation: 10 to 30 times faster than Python lists."""
    if values and all(isinstance(v, np.ndarray) and v.ndim == 1 for v in values):
        offsets = np.zeros(len(values) + 1, np.int64)
        np.cumsum([v.size for v in values], out=offsets[1:])
        return pyarrow.LargeListArray.from_arrays(pyarrow.array(offsets), pyarrow.array(np.concatenate(values)))
    return values


def export_parquet(database: str | Path, out_dir: str | Path) -> list[Path]:
    """Every table of the atlas database `database` as `out_dir/<table>.parquet` (DuckDB's own COPY), for any tool
    that reads Parquet (pandas, polars, Spark, DuckDB itself); the files written."""
    import duckdb

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(database), read_only=True)
    try:
        tables = [row[0] for row in con.execute("SELECT table_name FROM information_schema.tables "
                                                "WHERE table_schema = 'main' ORDER BY table_name").fetchall()]
        written = []
        for table in tables:
            target = out / f"{table}.parquet"
            con.execute(f"COPY \"{table}\" TO '{_quoted(target)}' (FORMAT PARQUET)")
            written.append(target)
        return written
    finally:
        con.close()


def _quoted(path: Path) -> str:
    """A path inside a SQL string literal (COPY takes no parameter for its target)."""
    return str(path.resolve()).replace("'", "''")
