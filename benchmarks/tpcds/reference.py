"""sqlglot's column lineage of the TPC-DS CTAS: the reference both lineage tools are held to.

For each statement, per output column in select order, the set of `(table, column)` source
fields sqlglot's `lineage()` traces the column's select expression to, through CTEs, subqueries
and set operations (every column the expression names: CASE conditions and window PARTITION BY /
ORDER BY columns included, WHERE / JOIN / GROUP BY columns not). Columns are paired with a tool's
output by position, since sqlglot names unaliased expressions `_col_N` where Spark prints them.

The table schemas come from the Parquet files themselves (column names only; lineage needs no
types). Results are cached per sqlglot version under `benchmarks/.data/reference/`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from benchmarks.tpcds.paths import DATA_ROOT
from benchmarks.tpcds.queries import Ctas

Field = tuple[str, str]  # (TPC-DS table, column), both lower case
# per output column in select order, its source fields; None when sqlglot could not trace the statement
StatementReference = list[frozenset[Field]] | None


def table_columns(tables_root: Path) -> dict[str, dict[str, str]]:
    """Table → {column: type} of every `<table>/*.parquet` under `tables_root`, for sqlglot."""
    import pyarrow.parquet as parquet

    schema: dict[str, dict[str, str]] = {}
    for table_dir in sorted(path for path in tables_root.iterdir() if path.is_dir()):
        first_file = next(iter(sorted(table_dir.glob("*.parquet"))))
        schema[table_dir.name] = {name: "STRING" for name in parquet.read_schema(first_file).names}
    return schema


def trace(select_sql: str, schema: dict[str, dict[str, str]]) -> list[frozenset[Field]]:
    """The source fields of each output column of `select_sql` (Spark SQL), in select order."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.lineage import lineage
    from sqlglot.optimizer.qualify import qualify

    tables: dict[str, object] = dict(schema)
    qualified = qualify(sqlglot.parse_one(select_sql, read="spark"), schema=tables, dialect="spark")
    if not isinstance(qualified, exp.Query):
        raise TypeError(f"not a query: {type(qualified).__name__}")
    columns = []
    for name in qualified.named_selects:
        root = lineage(name, qualified, schema=tables, dialect="spark")
        sources = set()
        for node in root.walk():
            if isinstance(node.expression, exp.Table):
                column = node.name.rsplit(".", 1)[-1].strip('"`')
                sources.add((node.expression.name.lower(), column.lower()))
        columns.append(frozenset(sources))
    return columns


def reference_for(
    statements: Sequence[Ctas], tables_root: Path, cache_dir: Path | None = None
) -> tuple[str, dict[str, StatementReference]]:
    """(sqlglot's version, statement → its reference), traced once per sqlglot version and cached."""
    import sqlglot

    version = str(sqlglot.__version__)
    cache = (cache_dir or DATA_ROOT / "reference") / f"sqlglot-{version}.json"
    known: dict[str, list[list[list[str]]] | None] = json.loads(cache.read_text()) if cache.exists() else {}
    missing = [statement for statement in statements if statement.name not in known]
    if missing:
        schema = table_columns(tables_root)
        for statement in missing:
            try:
                traced = trace(statement.select_sql, schema)
            except Exception:  # noqa: BLE001 - a statement sqlglot cannot trace is left out of the comparison
                known[statement.name] = None
                continue
            known[statement.name] = [sorted([list(field) for field in column]) for column in traced]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known, indent=0, sort_keys=True) + "\n")
    return version, {statement.name: _decoded(known[statement.name]) for statement in statements}


def _decoded(columns: list[list[list[str]]] | None) -> StatementReference:
    if columns is None:
        return None
    return [frozenset((table, column) for table, column in fields) for fields in columns]
