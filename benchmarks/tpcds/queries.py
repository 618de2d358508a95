"""The 99 TPC-DS queries wrapped as CTAS statements (pure: text in, statements out)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs

from benchmarks.tpcds.paths import queries_dir

TARGET_DATABASE = "bench"


@attrs.frozen
class Ctas:
    """One CTAS per query statement: q14 → q14, or q14_1 / q14_2 when a query has two parts."""

    name: str
    query_name: str
    select_sql: str

    @property
    def table(self) -> str:
        return f"{TARGET_DATABASE}.{self.name}"

    @property
    def sql(self) -> str:
        # CTAS accepts a leading WITH after AS, so every statement wraps the same way.
        return f"CREATE TABLE {self.table} USING parquet AS\n{self.select_sql}"

    @property
    def uses_double_quoted_identifiers(self) -> bool:
        # The generator writes column aliases such as "30 days" in double quotes.
        return '"' in self.select_sql


def split_statements(text: str) -> list[str]:
    """Statements of one query file; the TPC-DS texts carry no ';' inside literals."""
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def ctas_for(query_name: str, text: str) -> list[Ctas]:
    statements = split_statements(text)
    if len(statements) == 1:
        return [Ctas(query_name, query_name, statements[0])]
    return [Ctas(f"{query_name}_{part}", query_name, sql) for part, sql in enumerate(statements, start=1)]


def load_query_texts(source: Path | None = None) -> dict[str, str]:
    source = source or queries_dir()
    return {path.stem: path.read_text() for path in sorted(source.glob("q*.sql"))}


def select_queries(texts: dict[str, str], wanted: Sequence[str] | None) -> dict[str, str]:
    """Keep the wanted queries (`q1`, `q01` and `14` all name q14's file); all when None."""
    if not wanted:
        return texts
    names = [_normalize(name) for name in wanted]
    unknown = [name for name in names if name not in texts]
    if unknown:
        raise ValueError(f"unknown TPC-DS queries: {', '.join(unknown)}")
    return {name: texts[name] for name in names}


def all_ctas(texts: dict[str, str]) -> list[Ctas]:
    return [ctas for name, text in texts.items() for ctas in ctas_for(name, text)]


def parse_query_list(argument: str | None) -> list[str] | None:
    if not argument:
        return None
    return [item.strip() for item in argument.split(",") if item.strip()]


def _normalize(name: str) -> str:
    digits = name.strip().lower().removeprefix("q")
    return f"q{int(digits):02d}"


def names_of(statements: Iterable[Ctas]) -> list[str]:
    return [statement.name for statement in statements]
