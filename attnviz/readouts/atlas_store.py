"""The atlas's DuckDB file as tables: rows into a table at once (attnviz.readouts.atlas and the modules that store
beside it), and every table out as Parquet."""

from __future__ import annotations

from pathlib import Path


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
