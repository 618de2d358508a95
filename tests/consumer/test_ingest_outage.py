"""A database outage mid-stream: nothing is committed or dead-lettered, the batch is read
again and stored once the database is back. Real PostgreSQL (connections really refused);
the event source is an in-memory implementation of the Source port."""

from __future__ import annotations

import json
import time
import uuid

import attrs
import pytest
from sqlalchemy import create_engine, text

from consumer.ingest.kafka_loop import Ingestor
from consumer.ingest.store_writes import StoreWrites
from consumer.store import open_store
from tests.consumer.helpers import ListDeadLetters, ListSource, Record
from tests.support.databases import POSTGRES_ADMIN_URL
from tests.support.events import batch_write, table


@pytest.fixture
def outage_database(postgres_database_url):
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"lineage_outage_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin, name
    with admin.connect() as connection:
        connection.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _set_reachable(admin, name: str, reachable: bool) -> None:  # type: ignore[no-untyped-def]
    with admin.connect() as connection:
        connection.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(reachable).lower()}'))
        if not reachable:
            connection.execute(text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))


def test_a_batch_is_retried_after_a_database_outage_not_lost(outage_database):
    admin, name = outage_database
    store = open_store(admin.url.set(database=name).render_as_string(hide_password=False))
    events = [e for i in range(2) for e in batch_write(f"job{i}", [table("raw", "a", ["x"])], table("mart", f"t{i}", ["x"]))]
    source = ListSource([Record("events", 0, offset, json.dumps(e).encode()) for offset, e in enumerate(events)])
    dead_letters = ListDeadLetters()
    ingestor = Ingestor(store, source, dead_letters, retry_backoff_seconds=0)

    ingestor.run_once()  # batch 1 handed to the store thread
    ingestor.finish_in_flight()
    _set_reachable(admin, name, False)
    ingestor.run_once()  # batch 2 fails in the store...
    ingestor.run_once()  # ...so the next poll is dropped and the source rewound to batch 2
    during_outage = (source.committed, source.position, ingestor.stats.stored)
    _set_reachable(admin, name, True)
    ingestor.run_once()
    ingestor.close()
    store.dispose()

    assert during_outage == (2, 2, 2)
    assert (source.committed, ingestor.stats.stored, dead_letters.sent) == (4, 4, [])


def test_the_ingest_loop_sweeps_stale_finished_jobs(sqlite_store):
    from datetime import timedelta

    events = batch_write("old_job", [table("raw", "a", ["x"])], table("mart", "t", ["x"]))  # finished long ago
    source = ListSource([Record("events", 0, offset, json.dumps(e).encode()) for offset, e in enumerate(events)])
    ingestor = Ingestor(sqlite_store, source, ListDeadLetters(), retire_after=timedelta(days=1), sweep_every_seconds=0)

    ingestor.run_once()
    ingestor.close()

    with sqlite_store.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM job_io")).scalar_one() == 0
        assert connection.execute(text("SELECT lineage_retired_at IS NOT NULL FROM jobs")).scalar_one() == 1


@attrs.define
class SlowWrites:
    """A write hook holding each transaction open a little longer, and counting them."""

    writes: int = 0

    def __call__(self, write, proceed):  # type: ignore[no-untyped-def]
        time.sleep(0.2)
        stored = proceed()
        self.writes += 1
        return stored


def test_the_next_batch_is_prepared_while_the_previous_one_is_stored_and_commits_follow_the_stores(sqlite_store):
    events = [e for i in range(5) for e in batch_write(f"job{i}", [table("raw", "a", ["x"])], table("mart", f"t{i}", ["x"]))]
    slow = SlowWrites()
    writes_done_at_poll: list[int] = []
    commits: list[tuple[int, int]] = []  # (next offset committed, raw events stored by then)

    class WatchedSource(ListSource):
        def poll(self, timeout_ms: int) -> list[Record]:
            writes_done_at_poll.append(slow.writes)
            return super().poll(timeout_ms)

        def commit(self, next_offsets: dict[tuple[str, int], int]) -> bool:
            with sqlite_store.engine.connect() as connection:
                stored = connection.execute(text("SELECT count(*) FROM lineage_events")).scalar_one()
            commits.append((next_offsets[("events", 0)], stored))
            return super().commit(next_offsets)

    source = WatchedSource([Record("events", 0, offset, json.dumps(e).encode()) for offset, e in enumerate(events)])
    ingestor = Ingestor(StoreWrites(sqlite_store, [slow]), source, ListDeadLetters())  # type: ignore[arg-type]
    while ingestor.stats.records < len(events):
        ingestor.run_once()
    ingestor.close()

    # Batch k+1 (k = 1..5) is polled, then prepared, before batch k's write finished: one batch ahead.
    assert writes_done_at_poll == [0, 0, 1, 2, 3, 4]
    assert [offset for offset, _ in commits] == [2, 4, 6, 8, 10]  # in order, one per batch
    assert all(stored >= offset for offset, stored in commits)  # never ahead of what is stored
