"""Rows into the atlas's DuckDB tables at once (attnviz.readouts.atlas and the modules that store beside it)."""

from __future__ import annotations


def insert_rows(con, table: str, rows: list[list]) -> None:
    """`rows` into `table` (its columns in order) as one Arrow table DuckDB reads at once: `executemany` runs one
    statement a row, which took 28 s of a 64-text build's 53 (benchmarks/bench_atlas_headvis.py)."""
    if not rows:
        return
    import pyarrow

    names = [row[1] for row in con.execute(f"PRAGMA table_info('{table}')").fetchall()]
    batch = pyarrow.Table.from_pydict({name: [row[i] for row in rows] for i, name in enumerate(names)})
    con.register("_atlas_rows", batch)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM _atlas_rows")
    finally:
        con.unregister("_atlas_rows")
