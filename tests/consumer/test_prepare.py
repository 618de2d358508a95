"""Preparing batches (consumer.ingest.prepare): in a worker process exactly as in this one, a worker that
dies is replaced without losing its batch, and one whose parent dies ends too."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

import consumer.ingest.prepare
from consumer.ingest.fold import fold
from consumer.ingest.kafka_loop import Ingestor
from consumer.ingest.prepare import INVALID, TOO_LARGE, Preparer, prepare, prepare_batch
from consumer.ingest.store_writes import StoreWrites
from tests.consumer.helpers import ListDeadLetters, ListSource, Record, dump, write_events
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage
from tests.support.paths import PROJECT_ROOT


def _events(count: int) -> list[dict]:
    events = []
    for index in range(count):
        source = table("raw", f"src{index % 3}", ["id", "amount"], snapshot=f"s{index}")
        target = with_column_lineage(
            table("mart", f"t{index % 4}", ["id", "amount"], snapshot=f"t{index}"),
            {"id": [(source, "id")], "amount": [(source, "amount")]},
            indirect=[(source, "id", "JOIN")],
        )
        events += batch_write(f"job{index % 4}", [source], target, start=BASE_TIME.replace(minute=index))
    return events


def _values(events: list[dict]) -> list[bytes | None]:
    return [json.dumps(event).encode() for event in events]


def test_a_batch_prepared_in_a_worker_process_is_the_batch_prepared_here():
    values = [*_values(_events(6)), b"{not json", b"x" * 2000, None]
    preparer = Preparer(1000 * 1000, in_worker=True)
    try:
        in_worker = preparer.submit(values)()
    finally:
        preparer.close()
    here = prepare_batch(values, 1000 * 1000)

    assert in_worker.folded == here.folded
    assert in_worker.folded == fold([prepare(value) for value in values[:12]])
    assert in_worker.events is None, "a worker sends the folded batch only"
    assert {position: refused.reason_class for position, refused in in_worker.refused.items()} == {
        12: INVALID,
        13: INVALID,
        14: INVALID,
    }
    assert prepare_batch([b"x" * 2000], 1000).refused[0].reason_class == TOO_LARGE


def test_a_worker_that_dies_is_replaced_and_its_batch_prepared_here(caplog):
    values = _values(_events(4))
    preparer = Preparer(None, in_worker=True)
    try:
        first = preparer.submit(values)()
        worker = preparer._worker
        assert worker is not None
        os.kill(worker.process.pid, signal.SIGSTOP)  # it holds the next batch, unprepared, when it dies
        waiting = preparer.submit(values)
        worker.process.kill()
        assert waiting().folded == first.folded, "the batch the worker held was prepared here"
        assert "preparing this batch here" in caplog.text
        assert preparer.submit(values)().folded == first.folded
        assert preparer._worker is not None and preparer._worker.process.pid != worker.process.pid
    finally:
        preparer.close()


def test_the_worker_ends_with_the_process_it_prepares_for():
    probe = (
        "import os, signal, sys, json\n"
        "from consumer.ingest.prepare import Preparer\n"
        "preparer = Preparer(None, in_worker=True)\n"
        "preparer.submit([b'{}'])()\n"
        "print(preparer._worker.process.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    parent = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    worker_pid = int(parent.stdout.strip())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{worker_pid}").exists() and _state(worker_pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{worker_pid}").exists() or _state(worker_pid) == "Z", "the worker outlived its parent"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_a_batch_partly_stored_already_stores_the_rest_once(sqlite_store):
    events = _events(10)
    values = _values(events)
    StoreWrites(sqlite_store).write([prepare(value) for value in values[::3]])  # as Kafka delivered them: same bytes, same hash
    records = [Record("events", 0, offset, value) for offset, value in enumerate(values)]
    source = ListSource(records)
    ingestor = Ingestor(sqlite_store, source, ListDeadLetters(), preparer=Preparer(None, in_worker=True))  # type: ignore[arg-type]
    while ingestor.stats.records < len(records):
        ingestor.run_once()
    ingestor.close()

    assert ingestor.stats.stored == len(events) - len(events[::3])
    assert ingestor.stats.duplicates == len(events[::3]) and ingestor.stats.dead_lettered == 0
    assert source.committed == len(records)


def test_the_store_depends_only_on_the_events_however_they_were_prepared(store):
    events = _events(8)
    write_events(store, events)
    expected = dump(store)
    store.clear_derived()
    with store.engine.begin() as connection:
        connection.execute(text("DELETE FROM lineage_events"))
    preparer = Preparer(None, in_worker=True)
    try:
        for start in range(0, len(events), 5):
            prepared = preparer.submit(_values(events[start : start + 5]))()
            assert prepared.folded is not None
            StoreWrites(store).write_folded(prepared.folded, lambda: pytest.fail("nothing of the batch was stored before"))
    finally:
        preparer.close()
    assert dump(store) == expected


def test_a_batch_that_cannot_be_folded_is_stored_event_by_event(sqlite_store, monkeypatch, caplog):
    def broken_fold(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug in folding")

    monkeypatch.setattr(consumer.ingest.prepare, "fold", broken_fold)
    events = _events(3)
    records = [Record("events", 0, offset, value) for offset, value in enumerate(_values(events))]
    ingestor = Ingestor(sqlite_store, ListSource(records), ListDeadLetters(), preparer=Preparer(None, in_worker=False))  # type: ignore[arg-type]
    while ingestor.stats.records < len(records):
        ingestor.run_once()
    ingestor.close()

    assert "cannot fold a batch" in caplog.text
    assert ingestor.stats.stored == len(events) and ingestor.stats.dead_lettered == 0


def test_preparing_in_a_worker_is_the_default_where_there_is_a_second_cpu():
    assert Preparer(None).in_worker == ((os.cpu_count() or 1) > 1)


def test_no_cycle_collection_runs_while_a_batch_is_stored_and_the_collector_is_left_as_found(sqlite_store):
    values = _values(_events(4))
    during: list[bool] = []

    def observe(write, proceed):  # type: ignore[no-untyped-def]
        during.append(gc.isenabled())
        return proceed()

    writes = StoreWrites(sqlite_store, [observe])
    writes.write([prepare(value) for value in values[:2]])
    assert during == [False] and gc.isenabled()

    gc.disable()
    try:
        writes.write([prepare(value) for value in values[2:]])
        assert during == [False, False] and not gc.isenabled()  # paused by someone else: still paused
    finally:
        gc.enable()
