"""Many rows through one statement at driver speed.

SQLAlchemy's executemany prepares every row through its generic machinery (parameter
construction, one type processor call per value); for the store's batches of tens of thousands
of rows that was most of the write time. Here a statement is compiled once per call for the
columns the rows carry, each column gets its dialect's bind processor once, repeated times are
converted once, and the driver's own `executemany` gets plain tuples (SQLite) or dicts
(psycopg, which pipelines them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from consumer.store.schema import UtcDateTime

Processor = Callable[[Any], Any] | None


def execute_many(connection: Connection, statement: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> None:
    """Run `statement` once per row of `rows` (every row has the same keys) in one executemany."""
    if not rows:
        return
    dialect = connection.dialect
    keys = list(rows[0])
    compiled = statement.compile(dialect=dialect, column_keys=keys)
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"not a SQL statement: {statement!r}")
    names: list[str] = list(compiled.positiontup or ()) if compiled.positional else list(compiled.binds)
    from_rows = [name for name in names if name in rows[0]]
    constants = {
        name: _process(_processor(compiled.binds[name].type, dialect), compiled.params.get(name))
        for name in names
        if name not in rows[0]
    }
    values = [list(_values_of(row, from_rows)) for row in rows]
    for index, name in enumerate(from_rows):
        processor = _processor(compiled.binds[name].type, dialect)
        if processor is not None:
            for row_values in values:
                value = row_values[index]
                if value is not None:
                    row_values[index] = processor(value)
    parameters: list[Any]
    if compiled.positional:
        position = {name: index for index, name in enumerate(from_rows)}
        if not constants and from_rows == names:
            parameters = [tuple(row) for row in values]
        else:
            parameters = [tuple(row[position[name]] if name in position else constants[name] for name in names) for row in values]
    else:
        parameters = [{**constants, **dict(zip(from_rows, row, strict=True))} for row in values]
    connection.exec_driver_sql(str(compiled), parameters)


def _values_of(row: Mapping[str, Any], names: list[str]) -> tuple[Any, ...]:
    if len(names) == 1:
        return (row[names[0]],)
    return tuple(itemgetter(*names)(row))


def _process(processor: Processor, value: Any) -> Any:
    return value if processor is None or value is None else processor(value)


def _processor(type_: Any, dialect: Any) -> Processor:
    processor: Processor = type_.dialect_impl(dialect).bind_processor(dialect)
    if processor is None or not isinstance(type_, UtcDateTime):
        return processor
    return _memoized(processor)


def _memoized(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A batch repeats each event's time in many rows: convert each distinct time once."""
    seen: dict[Any, Any] = {}

    def convert(value: Any) -> Any:
        found = seen.get(value)
        if found is None:
            found = seen[value] = processor(value)
        return found

    return convert
