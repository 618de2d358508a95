"""Several writers: SQLite refuses a second writing process with a clear error; on PostgreSQL two
processes writing overlapping batches at once neither deadlock nor lose an update, and build the
store one writer builds."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import uuid
from datetime import timedelta

from consumer.store import open_store
from tests.consumer.helpers import write_events
from tests.consumer.test_store_properties import full_dump
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage
from tests.support.paths import PROJECT_ROOT


def test_a_second_sqlite_writer_process_gets_a_clear_error(sqlite_url):
    store = open_store(sqlite_url)
    store.claim_writer()
    write_events(store, batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"])))
    try:
        result = subprocess.run(
            [sys.executable, "-m", "consumer", "replay", "--store", sqlite_url],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=120,
        )
    finally:
        store.dispose()
    assert result.returncode == 2
    assert result.stderr.startswith("error: the SQLite store") and f"pid {os.getpid()}" in result.stderr
    assert result.stderr.count("\n") == 1
    database = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    database.close()
    after = open_store(sqlite_url)  # the first writer gone, the next one may write
    after.claim_writer()
    after.dispose()


def _events(count: int) -> list[dict]:
    """Runs of three jobs sharing datasets: every batch touches the same jobs, datasets and fields."""
    events = []
    for index in range(count):
        source = table("raw", f"s{index % 4}", ["id", "v"], snapshot=f"s{index}")
        output = with_column_lineage(table("mart", f"o{index % 3}", ["id", "v"]), {"id": [(source, "id")], "v": [(source, "v")]})
        events += batch_write(
            f"job{index % 3}", [source], output, run_id=str(uuid.UUID(int=index + 1)), start=BASE_TIME + timedelta(minutes=index)
        )
    return events


def _write_share(url: str, events: list[dict], start: multiprocessing.synchronize.Event) -> None:
    store = open_store(url)
    start.wait()
    for offset in range(0, len(events), 7):
        write_events(store, events[offset : offset + 7])
    store.dispose()


def test_two_postgres_writer_processes_build_what_one_builds(postgres_url):
    events = _events(60)
    reference = open_store(postgres_url)
    write_events(reference, events)
    expected = full_dump(reference)
    with reference.engine.begin() as connection:
        connection.exec_driver_sql("TRUNCATE lineage_events, namespaces, datasets, jobs, runs, column_lineage CASCADE")
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    # Interleaved halves in opposite orders: the most lock contention between the two.
    writers = [
        context.Process(target=_write_share, args=(postgres_url, events[0::2], start)),
        context.Process(target=_write_share, args=(postgres_url, events[1::2][::-1], start)),
    ]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(timeout=180)
    assert [writer.exitcode for writer in writers] == [0, 0]
    assert full_dump(reference) == expected
    reference.dispose()
