"""How the read side reaches the store: one read-only connection per question, plus the small
row helpers every query shares (ISO times, JSON columns, LIKE escaping, paging guards)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import ARRAY, BigInteger, Connection, Engine, any_, bindparam, cast

from consumer.query.errors import BadParameter

MAX_DEPTH = 100
MAX_PAGE = 10_000
MAX_OFFSET = 1_000_000_000  # within every database's integer range


def engine_of(store: Any) -> Engine:
    """The SQLAlchemy engine behind `store` (the store object, or an Engine given directly)."""
    return store if isinstance(store, Engine) else store.engine


@contextmanager
def reading(store: Any) -> Iterator[Connection]:
    with engine_of(store).connect() as connection:
        yield connection
        connection.rollback()


def in_ids(conn: Connection, column: Any, ids: Iterable[int]) -> Any:
    """`column IN (ids)`. On PostgreSQL one array parameter (`= ANY(CAST(:ids AS BIGINT[]))`): the
    statement's text is the same for any number of ids, so it is converted and planned once per
    connection instead of once per call with hundreds of parameters. (`consumer.query.graph`
    does the same for its SQL text.)"""
    if conn.dialect.name == "postgresql":
        return column == any_(cast(bindparam(None, list(ids)), ARRAY(BigInteger)))
    return column.in_(list(ids))


_NO_OFFSET = timedelta(0)


def iso(moment: datetime | str | None) -> str | None:
    """ISO-8601 in UTC with a Z, as Marquez writes instants (SQLite hands back naive UTC times)."""
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        return moment.isoformat() + "Z"
    if moment.utcoffset() == _NO_OFFSET:  # what the store hands back: its text ends in +00:00
        return moment.isoformat()[:-6] + "Z"
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat() + "Z"


def as_json(value: Any) -> Any:
    """JSON columns come back decoded on PostgreSQL and usually on SQLite; text is decoded here."""
    if isinstance(value, (str, bytes)):
        return json.loads(value)
    return value


def like_contains(text: str) -> str:
    """A LIKE pattern matching `text` anywhere; the caller's own % and _ stay wildcards (Marquez semantics)."""
    return f"%{text.lower()}%"


def parse_instant(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as error:
        raise BadParameter(f"{name}={text!r} is not an ISO-8601 instant") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def check_depth(depth: int) -> int:
    if not 0 <= depth <= MAX_DEPTH:
        raise BadParameter(f"depth={depth} is out of range 0..{MAX_DEPTH}")
    return depth


def check_page(limit: int, offset: int) -> tuple[int, int]:
    if not 0 <= limit <= MAX_PAGE:
        raise BadParameter(f"limit={limit} is out of range 0..{MAX_PAGE}")
    if not 0 <= offset <= MAX_OFFSET:
        raise BadParameter(f"offset={offset} is out of range 0..{MAX_OFFSET}")
    return limit, offset
