"""Raw events compressed with a zstd dictionary trained on the store's own events
(consumer.store.raw_dictionaries): trained once the store holds enough events, on every ingestion
path (a bare store's writes, HTTP, Kafka with a worker process); stores mixing frames without a
dictionary and with one or two read back every event's exact text, in this process and a fresh one,
and through a downgrade and upgrade of the schema."""

from __future__ import annotations

import json
import subprocess
import sys

from fastapi.testclient import TestClient
from sqlalchemy import text

from consumer.api import create_app
from consumer.ingest.fold import fold
from consumer.ingest.kafka_loop import Ingestor
from consumer.ingest.prepare import Preparer, prepare
from consumer.ingest.store_writes import StoreWrites
from consumer.query.marquez.catalog import lineage_events
from consumer.store import open_store
from consumer.store.compressed_text import NO_DICTIONARY, Dictionary, compress, dictionary_id, train
from tests.consumer.helpers import ListDeadLetters, ListSource, Record, write_events
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage
from tests.support.paths import PROJECT_ROOT

TRAIN_AFTER = 40  # events; the default (1,000) is for real stores


def _events(count: int, start: int = 0) -> list[dict]:
    """`count` events (START + COMPLETE of count/2 runs) of a few recurring jobs."""
    events = []
    for index in range(start, start + count // 2):
        source = table("raw", f"src{index % 5}", ["id", "amount", "customer", "day"], snapshot=f"s{index}")
        target = with_column_lineage(
            table("mart", f"t{index % 7}", ["id", "amount", "customer", "day"], snapshot=f"t{index}"),
            {"id": [(source, "id")], "amount": [(source, "amount")], "customer": [(source, "customer")]},
            indirect=[(source, "day", "FILTER")],
        )
        events += batch_write(
            f"app.job{index % 7}",
            [source],
            target,
            run_id=f"00000000-0000-0000-0000-{index:012d}",
            start=BASE_TIME.replace(day=1 + index // 1440, hour=index // 60 % 24, minute=index % 60),
        )
    return events


def _frames(store) -> list[tuple[int, bytes]]:  # type: ignore[no-untyped-def]
    with store.engine.connect() as connection:
        return [
            (row.id, bytes(row.payload)) for row in connection.execute(text("SELECT id, payload FROM lineage_events ORDER BY id"))
        ]


def _dictionary_ids(store) -> list[int]:  # type: ignore[no-untyped-def]
    with store.engine.connect() as connection:
        return sorted(connection.execute(text("SELECT id FROM raw_event_dictionaries")).scalars())


def _texts(store) -> list[str]:  # type: ignore[no-untyped-def]
    """Every raw event's text, as replay reads them."""
    return sorted(payload for chunk in store.raw_payloads(chunk_size=7) for payload in chunk)


def _api_texts(store) -> list[str]:  # type: ignore[no-untyped-def]
    answer = lineage_events(store, None, None, "asc", 1000, 0)
    return sorted(json.dumps(event, sort_keys=True) for event in answer["events"])


def _canonical(texts: list[str]) -> list[str]:
    return sorted(json.dumps(json.loads(payload), sort_keys=True) for payload in texts)


def test_once_the_store_holds_enough_events_a_dictionary_is_trained_and_new_events_use_it(store):
    store.raw_dictionaries.train_after_events = TRAIN_AFTER
    writes = StoreWrites(store)
    first, later = _events(TRAIN_AFTER - 2), _events(60, start=1000)
    write_events(store, first)
    assert writes.train_raw_dictionary() is None, "not yet: too few events"
    assert _dictionary_ids(store) == []
    write_events(store, first[:2] + later[:2])  # now TRAIN_AFTER events
    dictionary = writes.train_raw_dictionary()

    assert dictionary is not None and _dictionary_ids(store) == [dictionary.id] != [NO_DICTIONARY]
    assert writes.train_raw_dictionary() is dictionary, "once per store"
    before = {row_id for row_id, _ in _frames(store)}
    write_events(store, later[2:])
    new = [frame for row_id, frame in _frames(store) if row_id not in before]
    assert len(new) == len(later) - 2
    assert {dictionary_id(frame) for frame in new} == {dictionary.id}
    plain = [compress(payload) for payload in store_texts_of(store, new)]
    assert sum(map(len, new)) < 0.6 * sum(map(len, plain))
    assert _texts(store) == sorted(store_texts_of(store, [frame for _, frame in _frames(store)]))
    assert _canonical(_texts(store)) == _api_texts(store) == _canonical([json.dumps(event) for event in first + later])


def store_texts_of(store, frames: list[bytes]) -> list[str]:  # type: ignore[no-untyped-def]
    return [store.raw_text(frame) for frame in frames]


def test_http_ingestion_trains_the_dictionary_and_compresses_with_it(store):
    store.raw_dictionaries.train_after_events = TRAIN_AFTER
    events = _events(TRAIN_AFTER + 20)
    with TestClient(create_app(store)) as client:
        for start in range(0, TRAIN_AFTER, 10):
            assert client.post("/api/v1/lineage", json=events[start : start + 10]).status_code == 201
        assert len(_dictionary_ids(store)) == 1
        (dictionary,) = _dictionary_ids(store)
        for event in events[TRAIN_AFTER:]:
            assert client.post("/api/v1/lineage", json=event).status_code == 201
    frames = [frame for _, frame in _frames(store)]
    assert [dictionary_id(frame) for frame in frames] == [NO_DICTIONARY] * TRAIN_AFTER + [dictionary] * 20
    assert _canonical(_texts(store)) == _api_texts(store) == _canonical([json.dumps(event) for event in events])


def test_kafka_ingestion_trains_the_dictionary_and_its_worker_compresses_with_it(store):
    store.raw_dictionaries.train_after_events = TRAIN_AFTER
    events = _events(TRAIN_AFTER + 30)
    values = [json.dumps(event).encode() for event in events]
    records = [Record("events", 0, offset, value) for offset, value in enumerate(values)]
    ingestor = Ingestor(store, ListSource(records), ListDeadLetters(), preparer=Preparer(None, in_worker=True))  # type: ignore[arg-type]
    try:
        while ingestor.stats.records < len(records):
            ingestor.run_once()
    finally:
        ingestor.close()

    (dictionary,) = _dictionary_ids(store)
    used = [dictionary_id(frame) for _, frame in _frames(store)]
    assert used[:TRAIN_AFTER] == [NO_DICTIONARY] * TRAIN_AFTER
    # the batches polled while the dictionary was trained (two records a poll) may still go without
    assert set(used[TRAIN_AFTER + 4 :]) == {dictionary} and len(used) == len(events)
    assert _texts(store) == sorted(payload.decode() for payload in values)


def _mixed_store(store) -> tuple[list[str], Dictionary, Dictionary]:  # type: ignore[no-untyped-def]
    """`store` with raw events compressed three ways: without a dictionary, with one, with another;
    the texts of its events."""
    batches = [_events(20, start=100 * part) for part in range(3)]
    texts = [json.dumps(event) for event in batches[0] + batches[1] + batches[2]]
    one = train([json.dumps(event) for event in _events(60, start=500)])
    other = train([json.dumps(event) for event in _events(60, start=900)])
    assert one.id != other.id
    for batch, dictionary in zip(batches, (None, one, other), strict=True):
        if dictionary is not None:
            store.raw_dictionaries.add(dictionary)  # as two writers that trained at once leave them
        events = [prepare(json.dumps(event)) for event in batch]
        StoreWrites(store).write_folded(fold(events, dictionary=dictionary), lambda events=events: events)
    assert sorted({dictionary_id(frame) for _, frame in _frames(store)}) == sorted({NO_DICTIONARY, one.id, other.id})
    return sorted(texts), one, other


def test_a_store_mixing_frames_without_and_with_two_dictionaries_reads_every_event(store, store_url):
    texts, _, _ = _mixed_store(store)

    assert _texts(store) == texts
    assert _api_texts(store) == _canonical(texts)
    # a reader in a fresh process (nothing cached) reads them too
    probe = (
        "import json, sys; from consumer.store import open_store; "
        "store = open_store(sys.argv[1], migrate=False); "
        "print(json.dumps(sorted(t for chunk in store.raw_payloads() for t in chunk)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, store_url], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == texts


def test_the_events_api_reads_dictionary_frames_through_a_bare_engine(store):
    texts, _, _ = _mixed_store(store)
    answer = lineage_events(store.engine, None, None, "desc", 1000, 0)
    assert sorted(json.dumps(event, sort_keys=True) for event in answer["events"]) == _canonical(texts)


def test_a_writer_uses_the_dictionary_another_trained_and_the_same_events_train_the_same_one(store, store_url):
    write_events(store, _events(TRAIN_AFTER))
    store.raw_dictionaries.train_after_events = TRAIN_AFTER
    trained = store.raw_dictionaries.train_if_due()
    other = open_store(store_url, migrate=False)  # another writer, which knows no dictionary yet
    try:
        assert trained is not None and other.raw_dictionaries.current() is None
        assert other.raw_dictionaries.train_if_due() == trained
        # two writers that trained on the same newest events at once: one dictionary, one row
        again = train(_texts(store))
        assert train(_texts(store)) == again
        assert other.raw_dictionaries.add(again) == store.raw_dictionaries.add(again) == again
        assert len(_dictionary_ids(store)) == 2
    finally:
        other.dispose()


def test_events_too_few_to_train_on_leave_the_store_without_a_dictionary(store, caplog):
    store.raw_dictionaries.train_after_events = 2
    write_events(store, _events(2))
    assert store.raw_dictionaries.train_if_due() is None
    assert "without a dictionary for now" in caplog.text
    assert _dictionary_ids(store) == []
    assert len(_texts(store)) == 2


def test_compact_events_rewrites_the_events_stored_before_the_dictionary_with_it(store, store_url):
    from consumer.cli import main

    events = _events(TRAIN_AFTER + 20)
    write_events(store, events)
    assert main(["compact-events", "--store", store_url]) == 1, "no dictionary yet: nothing to compact with"
    store.raw_dictionaries.train_after_events = TRAIN_AFTER
    dictionary = store.raw_dictionaries.train_if_due()
    assert dictionary is not None
    before, texts = sum(len(frame) for _, frame in _frames(store)), _texts(store)

    result = subprocess.run(
        [sys.executable, "-m", "consumer", "compact-events", "--store", store_url],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    after = sum(len(frame) for _, frame in _frames(store))
    assert report["dictionary"] == dictionary.id and report["rewrittenEvents"] == len(events)
    assert report["bytesBefore"] == before and report["bytesAfter"] == after < 0.6 * before
    assert {dictionary_id(frame) for _, frame in _frames(store)} == {dictionary.id}
    assert _texts(store) == texts
    again = subprocess.run(result.args, cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert json.loads(again.stdout)["rewrittenEvents"] == 0, "a second run has nothing to do"
