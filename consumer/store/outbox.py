"""The change outbox: messages appended inside a store transaction, read back in order by the
publisher (consumer.ingest.change_publishing), removed once the broker acknowledged them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, delete, func, insert, select, text

from consumer.store.schema import change_outbox

# Any constant the publishers of one PostgreSQL store agree on: one publishes at a time, so a
# key's messages reach the topic in the order they were written.
_PG_PUBLISHER_LOCK = 7_340_002


def append(connection: Connection, messages: Iterable[tuple[bytes, bytes]]) -> int:
    rows = [{"message_key": key, "message": value} for key, value in messages]
    if rows:
        connection.execute(insert(change_outbox), rows)
    return len(rows)


def oldest(connection: Connection, limit: int) -> list[tuple[int, bytes, bytes]]:
    """Up to `limit` messages not yet published, oldest first: (id, key, message)."""
    query = select(change_outbox.c.id, change_outbox.c.message_key, change_outbox.c.message)
    return [(row[0], bytes(row[1]), bytes(row[2])) for row in connection.execute(query.order_by(change_outbox.c.id).limit(limit))]


def remove(connection: Connection, ids: Sequence[int]) -> None:
    if ids:
        connection.execute(delete(change_outbox).where(change_outbox.c.id.in_(list(ids))))


def count(connection: Connection) -> int:
    return int(connection.execute(select(func.count()).select_from(change_outbox)).scalar_one())


@contextmanager
def publisher(engine: Engine) -> Iterator[bool]:
    """Whether this process may publish now; until the block ends no other may. PostgreSQL: a
    session advisory lock (several writer processes; the database drops it if this one dies).
    SQLite: always (one writer process, whose publishes the caller serializes)."""
    if engine.dialect.name != "postgresql":
        yield True
        return
    with engine.connect() as connection:
        claimed = bool(connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": _PG_PUBLISHER_LOCK}).scalar())
        connection.commit()
        try:
            yield claimed
        finally:
            if claimed:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_PUBLISHER_LOCK})
                connection.commit()
