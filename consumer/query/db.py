"""How the read side reaches the store: one read-only connection per question, bounded in time
by the caller's `QueryBudget` (see `budgeted`), plus the small row helpers every query shares
(ISO times, JSON columns, LIKE escaping, paging guards)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import ARRAY, BigInteger, Connection, Engine, any_, bindparam, text

from consumer.query.errors import BadParameter

_Statement = TypeVar("_Statement")
# Far more than any statement has (kinds of database times the few forms a statement takes); a
# bound all the same, so that no caller can grow the memo without end.
_SHAPES_PER_STATEMENT = 64

MAX_DEPTH = 100
MAX_PAGE = 10_000
MAX_OFFSET = 1_000_000_000  # within every database's integer range


def engine_of(store: Any) -> Engine:
    """The SQLAlchemy engine behind `store` (the store object, or an Engine given directly)."""
    return store if isinstance(store, Engine) else store.engine


# SQLite calls the budget's check every this many virtual-machine steps (a few microseconds each).
SQLITE_CHECK_EVERY_STEPS = 10_000


class QueryBudget:
    """How long the database work of one request may take, and whether its asker still waits.

    Every connection `reading` opens while the budget is current (`budgeted`) stops when the time
    is up or on `cancel()` (the client went away), from any thread: PostgreSQL by its
    `statement_timeout` and a cancel request, SQLite by a progress handler and `interrupt()`.
    The statement then fails with the database's own error (`is_stopped_query` tells it apart)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.cancelled = False
        self._lock = threading.Lock()
        self._open: list[Any] = []  # DB-API connections working for this budget now

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            working = list(self._open)
        for dbapi_connection in working:
            _interrupt(dbapi_connection)

    def spent(self) -> bool:
        return self.cancelled or time.monotonic() >= self.deadline

    @contextmanager
    def bounding(self, connection: Connection) -> Iterator[None]:
        dbapi_connection = connection.connection.dbapi_connection
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            dbapi_connection.set_progress_handler(self.spent, SQLITE_CHECK_EVERY_STEPS)  # type: ignore[union-attr]
        else:  # for this transaction only: reading() rolls it back
            milliseconds = max(1, int((self.deadline - time.monotonic()) * 1000))
            connection.execute(text(f"SET LOCAL statement_timeout = {milliseconds}"))
        with self._lock:
            self._open.append(dbapi_connection)
        try:
            if self.cancelled:
                _interrupt(dbapi_connection)
            yield
        finally:
            with self._lock:
                self._open.remove(dbapi_connection)
            if sqlite:
                dbapi_connection.set_progress_handler(None, 0)  # type: ignore[union-attr]


def _interrupt(dbapi_connection: Any) -> None:
    """Stop what the connection runs now (sqlite3: interrupt(); psycopg: a cancel request)."""
    stop = getattr(dbapi_connection, "interrupt", None) or getattr(dbapi_connection, "cancel", None)
    if stop is not None:
        try:
            stop()
        except Exception:  # noqa: BLE001, S110 - a connection closing meanwhile: nothing left to stop
            pass


_current_budget: ContextVar[QueryBudget | None] = ContextVar("query_budget", default=None)


@contextmanager
def budgeted(budget: QueryBudget) -> Iterator[QueryBudget]:
    """Make `budget` bound every `reading` in this context (threads started from it included)."""
    token = _current_budget.set(budget)
    try:
        yield budget
    finally:
        _current_budget.reset(token)


def is_stopped_query(error: BaseException) -> bool:
    """Whether a database error is a statement stopped by its budget (timeout or cancel)."""
    orig = getattr(error, "orig", None) or error
    if type(orig).__name__ == "QueryCanceled":  # psycopg: statement_timeout or a cancel request
        return True
    return type(orig).__module__ == "sqlite3" and "interrupted" in str(orig)


@contextmanager
def reading(store: Any) -> Iterator[Connection]:
    with engine_of(store).connect() as connection:
        budget = _current_budget.get()
        if budget is None:
            yield connection
        else:
            with budget.bounding(connection):
                yield connection
        connection.rollback()


def ids_in(dialect: str, column: Any, name: str) -> Any:
    """`column IN :name`, the integer ids bound when the statement runs (`{name: ids}`), so that a
    statement built once (`statement_cache`) serves every call. On PostgreSQL one array parameter
    (`= ANY(:name::BIGINT[])`): the statement's text is the same for any number of ids, so
    it is converted and planned once per connection instead of once per call with hundreds of
    parameters; elsewhere an expanded list. (`consumer.query.graph` does the same for its SQL text.)"""
    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=ARRAY(BigInteger)))
    return column.in_(bindparam(name, expanding=True))


def statement_cache(build: Callable[..., _Statement]) -> Callable[..., _Statement]:
    """`build(dialect name, *shape)` called once per kind of database and shape (hashable arguments
    that choose the statement's form, never a value a request gives: those are bound when it
    runs), its statement reused by every call `(connection, *shape)`: statements are immutable,
    and building one of a few joins and subqueries costs SQLAlchemy more than the database takes
    to run it."""
    built = lru_cache(maxsize=_SHAPES_PER_STATEMENT)(build)

    def for_connection(conn: Connection, *shape: Hashable) -> _Statement:
        return built(conn.dialect.name, *shape)

    return for_connection


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
