"""TPC-DS data and queries, generated offline with duckdb + duckdb-extension-tpcds.

The only module importing duckdb.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import duckdb_extension_tpcds

from benchmarks.tpcds.paths import SCALE_FACTOR, queries_dir, tables_dir


def _extension_file() -> Path:
    """The `.duckdb_extension` shipped inside the wheel (no network install)."""
    package_dir = Path(duckdb_extension_tpcds.__file__).parent
    version_dir = package_dir / "extensions" / f"v{duckdb.__version__}"
    return version_dir / "tpcds.duckdb_extension"


def _connect() -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute(f"INSTALL '{_extension_file()}'")
    connection.execute("LOAD tpcds")
    return connection


def query_texts() -> dict[str, str]:
    """Query name (q01..q99) → SQL text, from `tpcds_queries()`."""
    rows = _connect().execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall()
    return {f"q{number:02d}": text for number, text in rows}


def write_queries(target: Path | None = None) -> Path:
    target = target or queries_dir()
    target.mkdir(parents=True, exist_ok=True)
    for name, text in query_texts().items():
        (target / f"{name}.sql").write_text(text)
    return target


def write_tables(scale_factor: float = SCALE_FACTOR, target: Path | None = None) -> Path:
    """Run dsdgen and export every table as `<target>/<table>/part-0.parquet`."""
    target = target or tables_dir(scale_factor)
    connection = _connect()
    connection.execute(f"CALL dsdgen(sf={scale_factor})")
    table_names = [row[0] for row in connection.execute("SHOW TABLES").fetchall()]
    for table in table_names:
        table_dir = target / table
        if table_dir.exists():
            shutil.rmtree(table_dir)
        table_dir.mkdir(parents=True)
        connection.execute(f"COPY {table} TO '{table_dir / 'part-0.parquet'}' (FORMAT parquet)")
    return target


def table_names(source: Path | None = None) -> list[str]:
    source = source or tables_dir()
    return sorted(entry.name for entry in source.iterdir() if entry.is_dir())


def ensure_generated(scale_factor: float = SCALE_FACTOR) -> None:
    """Generate tables and queries unless they already exist (idempotent)."""
    if not tables_dir(scale_factor).is_dir() or not table_names(tables_dir(scale_factor)):
        write_tables(scale_factor)
    if not queries_dir().is_dir() or len(list(queries_dir().glob("q*.sql"))) < 99:
        write_queries()
