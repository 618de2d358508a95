"""Where the benchmark keeps its untracked data (benchmarks/.data/, git-ignored)."""

from __future__ import annotations

from pathlib import Path

SCALE_FACTOR = 0.1
DATA_ROOT = Path(__file__).resolve().parent.parent / ".data"


def tables_dir(scale_factor: float = SCALE_FACTOR) -> Path:
    """One sub-directory of Parquet files per TPC-DS table."""
    return DATA_ROOT / f"tpcds_sf{scale_factor:g}"


def queries_dir() -> Path:
    """The 99 query texts as qNN.sql, as duckdb-extension-tpcds ships them."""
    return DATA_ROOT / "queries"


def plans_dir() -> Path:
    """Optimized plan JSONs captured from the CTAS of each query."""
    return DATA_ROOT / "plans"


def results_dir() -> Path:
    """Per-run benchmark outputs (JSON summaries, emitted event files)."""
    return DATA_ROOT / "results"
