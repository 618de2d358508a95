"""Many rows through one statement at driver speed.

SQLAlchemy's executemany prepares every row through its generic machinery (parameter
construction, one type processor call per value); for the store's batches of tens of thousands
of rows that was most of the write time. Here a statement is compiled once per call for the
columns the rows carry, and the values are handled a column at a time: each column gets its
dialect's bind processor once, and a column of times or flags (few distinct values, many rows)
converts each distinct value once. SQLite: the driver's own `executemany` gets plain tuples (a C
loop over one prepared statement). PostgreSQL: an INSERT becomes ONE statement for all its rows,
each column sent as one array and the rows read back with `unnest` (`INSERT ... SELECT * FROM
unnest(...) ON CONFLICT ...`): per-row statements cost the server a bind and an execution each,
which was most of PostgreSQL's write time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any

from sqlalchemy import Boolean, Connection, Insert, Update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from consumer.store.schema import UtcDateTime

Processor = Callable[[Any], Any] | None


@contextmanager
def overlapped(connection: Connection) -> Iterator[None]:
    """PostgreSQL: the statements sent inside the block do not wait for the server (psycopg's
    pipeline mode), so the server runs each while Python builds the next; the block must not read
    results. It ends when the server has run them all; an error of any of them is raised there, as
    the DBAPIError SQLAlchemy would have raised. Elsewhere the block runs as it is."""
    driver = connection.connection.driver_connection
    if connection.dialect.name != "postgresql" or driver is None:
        yield
        return
    driver_error = connection.dialect.loaded_dbapi.Error
    try:
        with driver.pipeline():
            yield
    except driver_error as error:
        raise DBAPIError.instance(None, None, error, driver_error, dialect=connection.dialect) from error


def execute_many(connection: Connection, statement: ClauseElement, rows: Sequence[Mapping[str, Any]]) -> None:
    """Run `statement` for every row of `rows` (every row has the same keys): one executemany, or on
    PostgreSQL (an INSERT or UPDATE) one execution over column arrays."""
    if not rows:
        return
    dialect = connection.dialect
    keys = list(rows[0])
    if isinstance(statement, Insert):
        statement = statement.inline()  # no RETURNING of the new ids: callers select what they need
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
    columns = [
        _converted(_processor(compiled.binds[name].type, dialect), compiled.binds[name].type, column)
        for name, column in zip(from_rows, _columns(rows, from_rows), strict=True)
    ]
    parameters: list[Any]
    if dialect.name == "postgresql" and isinstance(statement, Insert | Update) and not constants:
        types = {name: _LENGTH.sub("", compiled.binds[name].type.compile(dialect)) for name in from_rows}
        set_based = _from_arrays(str(compiled), types)
        connection.exec_driver_sql(set_based, dict(zip(from_rows, columns, strict=True)))
        return
    if compiled.positional:
        if not constants and from_rows == names:
            parameters = list(zip(*columns, strict=True))
        else:
            by_name = dict(zip(from_rows, columns, strict=True))
            parameters = list(
                zip(*(by_name[name] if name in by_name else [constants[name]] * len(rows) for name in names), strict=True)
            )
    else:
        parameters = [{**constants, **dict(zip(from_rows, row, strict=True))} for row in zip(*columns, strict=True)]
    connection.exec_driver_sql(str(compiled), parameters)


# psycopg's compiled placeholders: %(name)s, most with a cast to the type without its length
# (%(name)s::VARCHAR): an array cast to VARCHAR(n)[] would cut longer values instead of refusing them.
_TYPE = r"TIMESTAMP WITH(?:OUT)? TIME ZONE|DOUBLE PRECISION|[A-Z]+"
_ONE_PLACEHOLDER = re.compile(rf"%\((\w+)\)s(?:::({_TYPE}))?")
_VALUES = re.compile(rf" VALUES \(({_ONE_PLACEHOLDER.pattern}(?:, {_ONE_PLACEHOLDER.pattern})*)\)")
_LENGTH = re.compile(r"\(\d+\)")
_GIVEN = "given"  # the alias of the unnested rows in an UPDATE


def _from_arrays(sql: str, types: Mapping[str, str]) -> str:
    """The statement for all rows at once, each placeholder now a column array (`types`: the SQL type
    of each placeholder the compiler left uncast):
    `INSERT ... VALUES (%(a)s, ...) rest` -> `INSERT ... SELECT * FROM unnest(%(a)s::T[], ...) rest`;
    `UPDATE t SET x=%(a)s WHERE t.k = %(b)s` -> `UPDATE t SET x=given.a FROM unnest(...) AS given(a, b) WHERE t.k = given.b`."""
    if sql.startswith("INSERT"):
        found = _VALUES.search(sql)
        if found is None:
            raise ValueError(f"not a one-row INSERT ... VALUES statement: {sql}")  # noqa: S608 - rewrites SQLAlchemy's own compiled statement; values stay bound
        placeholders = dict(_placeholders(found.group(1), types))
        return f"{sql[: found.start()]} SELECT * FROM {_unnest(placeholders)}{sql[found.end() :]}"  # noqa: S608 - rewrites SQLAlchemy's own compiled statement; values stay bound
    if not sql.startswith("UPDATE") or " WHERE " not in sql:
        raise ValueError(f"not an INSERT or UPDATE ... WHERE statement: {sql}")
    placeholders = dict(_placeholders(sql, types))
    columns = _ONE_PLACEHOLDER.sub(lambda matched: f"{_GIVEN}.{matched.group(1)}", sql)
    head, where = columns.split(" WHERE ", 1)
    return f"{head} FROM {_unnest(placeholders)} AS {_GIVEN}({', '.join(placeholders)}) WHERE {where}"


def _placeholders(sql: str, types: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, type) of each placeholder in `sql`, in order."""
    found = [(matched.group(1), matched.group(2) or types.get(matched.group(1))) for matched in _ONE_PLACEHOLDER.finditer(sql)]
    unknown = [name for name, type_ in found if type_ is None]
    if unknown:
        raise ValueError(f"no values given for {unknown} in {sql}")
    return [(name, type_) for name, type_ in found if type_ is not None]


def _unnest(placeholders: Mapping[str, str]) -> str:
    # %b: binary arrays (psycopg escapes every element of a text-format array in Python)
    return f"unnest({', '.join(f'%({name})b::{type_}[]' for name, type_ in placeholders.items())})"


def _columns(rows: Sequence[Mapping[str, Any]], names: list[str]) -> list[list[Any]]:
    """The rows' values, a list per name."""
    if len(names) == 1:
        return [[row[names[0]] for row in rows]]
    return [list(column) for column in zip(*map(itemgetter(*names), rows), strict=True)]


def _converted(processor: Processor, type_: Any, column: list[Any]) -> list[Any]:
    """`column`'s values as the driver takes them (NULL stays NULL)."""
    if processor is None:
        return column
    if isinstance(type_, UtcDateTime | Boolean):
        # A batch repeats each event's time (and each flag) in many rows: each distinct value once.
        return list(map(_Conversions(processor).__getitem__, column))
    return [None if value is None else processor(value) for value in column]


class _Conversions(dict[Any, Any]):
    """Converted values by value, each converted once, when first asked for."""

    def __init__(self, processor: Callable[[Any], Any]) -> None:
        super().__init__({None: None})
        self.processor = processor

    def __missing__(self, value: Any) -> Any:
        converted = self[value] = self.processor(value)
        return converted


def _process(processor: Processor, value: Any) -> Any:
    return value if processor is None or value is None else processor(value)


def _processor(type_: Any, dialect: Any) -> Processor:
    if isinstance(type_, UtcDateTime):
        return _time_processor(type_, dialect)
    processor: Processor = type_.dialect_impl(dialect).bind_processor(dialect)
    return processor


@cache  # one per dialect: the same times recur in every table of a batch
def _time_processor(type_: UtcDateTime, dialect: Any) -> Processor:
    processor: Processor = type_.dialect_impl(dialect).bind_processor(dialect)
    return None if processor is None else lru_cache(maxsize=1 << 16)(processor)
