"""Real databases for the consumer's store: `sqlite_store` (a file in tmp_path),
`postgres_store` (a fresh schema in a database created for this test session in the
PostgreSQL at $LINEAGE_TEST_POSTGRES_URL, dropped afterwards; `./run tests` starts a cluster of its
own and sets it, `./run postgres` prints it; unset or unreachable -> `skip_or_fail`) and `store`, which runs a test on both —
the store contract test. `store_url` is the same pair as URLs, for tests that start the CLI."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.require import skip_or_fail

POSTGRES_URL_ENV = "LINEAGE_TEST_POSTGRES_URL"
POSTGRES_ADMIN_URL = os.environ.get(POSTGRES_URL_ENV, "")


@pytest.fixture(scope="session")
def postgres_database_url() -> Iterator[str]:
    """A database created for this test session, dropped when it ends."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    if not POSTGRES_ADMIN_URL:
        skip_or_fail(f"no PostgreSQL: ${POSTGRES_URL_ENV} is not set (./run tests starts one; ./run postgres prints its URL)")
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"lineage_test_{uuid.uuid4().hex[:10]}"
    unreachable = None
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as error:
        admin.dispose()
        unreachable = str(error.orig).splitlines()[0]
    if unreachable is not None:
        skip_or_fail(f"PostgreSQL unreachable at {make_url(POSTGRES_ADMIN_URL).host}: {unreachable}")
    yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def postgres_url(postgres_database_url: str) -> Iterator[str]:
    """A URL whose connections live in a fresh schema of the session database."""
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:10]}"
    engine = create_engine(postgres_database_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    yield f"{postgres_database_url}?options=-csearch_path%3D{schema}"
    with engine.connect() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'lineage.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def _opened(url: str) -> Iterator[object]:
    from consumer.store import open_store

    store = open_store(url)
    yield store
    store.dispose()


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[object]:
    yield from _opened(sqlite_url)


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[object]:
    yield from _opened(postgres_url)


@pytest.fixture
def store(store_url: str) -> Iterator[object]:
    yield from _opened(store_url)


def query_plan(store: Any, statement: Any) -> str:
    """`statement`'s query plan, its parameters written into it (PostgreSQL: with table scans priced
    out, so a scan left in the plan is one no index could replace)."""
    with store.engine.begin() as connection:
        sql = str(statement.compile(connection, compile_kwargs={"literal_binds": True}))
        if connection.dialect.name == "sqlite":
            return "\n".join(row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {sql}"))
