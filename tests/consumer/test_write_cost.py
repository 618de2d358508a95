"""What a batch costs the store follows what it brings, not how much the store already holds: a
scheduled job's next run costs the same work after 10 runs as after 100 (SQLite's virtual machine
steps, counted with its progress handler: every row a statement reads or writes is some)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import event

from consumer.store import open_store
from tests.consumer.helpers import write_events
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage

JOBS = 5
STEPS_PER_CALL = 100


def _runs(first: int, count: int) -> list[dict[str, Any]]:
    """`count` hourly runs of each of JOBS jobs (each reads its source, writes its target), from run `first` on."""
    events: list[dict[str, Any]] = []
    for index in range(first, first + count):
        for job in range(JOBS):
            source = table("db", f"source_{job}", ["a", "b"], snapshot=f"in-{index}")
            target = table("db", f"target_{job}", ["a", "b"], snapshot=f"out-{index}")
            events += batch_write(
                f"app.job_{job}",
                [source],
                with_column_lineage(target, {"a": [(source, "a")], "b": [(source, "b")]}),
                run_id=str(uuid.UUID(int=index * JOBS + job + 1)),
                start=BASE_TIME + timedelta(hours=index),
                duration=timedelta(minutes=5),
            )
    return events


def _steps_of_the_next_run(sqlite_url: str, history: int) -> int:
    """The store's work (in STEPS_PER_CALL virtual machine steps) to write one more run of every job."""
    store = open_store(sqlite_url)
    write_events(store, _runs(0, history))
    calls = 0

    def count() -> int:
        nonlocal calls
        calls += 1
        return 0  # go on

    store.engine.dispose()  # new connections, each counting
    event.listen(store.engine, "connect", lambda connection, _: connection.set_progress_handler(count, STEPS_PER_CALL))
    write_events(store, _runs(history, 1))
    store.dispose()
    return calls


def test_a_jobs_next_run_costs_the_same_after_ten_runs_as_after_a_hundred(tmp_path):
    after_ten = _steps_of_the_next_run(f"sqlite:///{tmp_path / 'ten.db'}", 10)
    after_a_hundred = _steps_of_the_next_run(f"sqlite:///{tmp_path / 'hundred.db'}", 100)

    # B-trees one level deeper may add a little; reading every run of each job, every batch, doubled it
    assert after_a_hundred <= after_ten * 1.2, (after_ten, after_a_hundred)
