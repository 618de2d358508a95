"""What migrations that rewrite stored values share: a table's rows read by id, a thousand at a
time, each chunk's new values written by id in one statement."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa

CHUNK = 1000


def rows_by_id(connection: sa.Connection, table: sa.TableClause, column: str, chunk: int = CHUNK) -> Iterator[Sequence[Any]]:
    """The (id, `column`) rows of `table` in id order, `chunk` at a time."""
    last = 0
    while True:
        rows = connection.execute(
            sa.select(table.c.id, table.c[column]).where(table.c.id > last).order_by(table.c.id).limit(chunk)
        ).all()
        if not rows:
            return
        yield rows
        last = rows[-1].id


def rewrite(
    connection: sa.Connection, table: sa.TableClause, source: str, target: str, convert: Callable[[Any], Any | None]
) -> None:
    """`target` := `convert(source)` on every row of `table` where it gives a value (None: the row stays)."""
    update = table.update().where(table.c.id == sa.bindparam("row_id")).values({target: sa.bindparam("converted")})
    for rows in rows_by_id(connection, table, source):
        converted = [{"row_id": row.id, "converted": value} for row in rows if (value := convert(row[1])) is not None]
        if converted:
            connection.execute(update, converted)
