"""Helpers for consumer tests: write events through the real validate -> materialize -> store
path, and dump the derived stores by natural keys (ids differ between databases and rebuilds)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable
from datetime import timezone
from pathlib import Path
from typing import Any

import attrs
from sqlalchemy import text

from consumer.ingest.kafka_io import DeadLetters, EventSource
from consumer.ingest.kafka_loop import Ingestor, SourceState
from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from consumer.store import Store
from consumer.store.compressed_text import FACETS_V1, decompress_facets

DRAIN_LIMIT_SECONDS = 90.0


# In-memory implementations of the ingestion loop's ports (consumer.ingest.Source, DeadLetterSink).
@attrs.define
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes | None


@attrs.define
class ListSource:
    records: list[Record]
    position: int = 0
    committed: int = 0

    def poll(self, timeout_ms: int) -> list[Record]:
        batch = self.records[self.position : self.position + 2]
        self.position += len(batch)
        return batch

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> bool:
        self.committed = next_offsets[("events", 0)]
        return True

    def rewind(self, first_offsets: dict[tuple[str, int], int]) -> None:
        self.position = first_offsets[("events", 0)]

    def on_revoke(self, callback) -> None:  # type: ignore[no-untyped-def]
        pass

    def state(self) -> SourceState:
        return SourceState(assigned=(("events", 0),))


@attrs.define
class ListDeadLetters:
    sent: list[tuple[bytes | None, list]] = attrs.Factory(list)
    max_value_bytes: int = 1000

    def send(self, value, headers, key=None) -> None:  # type: ignore[no-untyped-def]
        self.sent.append((value, headers))

    def flush(self, timeout_seconds: float = 30.0) -> None:
        pass


def write_events(store: Store, events: Iterable[dict[str, Any]]) -> int:
    return StoreWrites(store).write([materialize(validate(event)) for event in events])


def ingest_all(
    store: Store | StoreWrites, bootstrap: str, topic: str, expected: int, *, group: str | None = None, max_records: int = 500
) -> Ingestor:
    """Run one consumer-group member until `expected` records were handled (bounded wait)."""
    source = EventSource(bootstrap, topic, group or f"g-{uuid.uuid4().hex[:8]}", max_records=max_records)
    dead_letters = DeadLetters(bootstrap, f"{topic}.dlq")
    ingestor = Ingestor(store, source, dead_letters, poll_timeout_ms=500)
    deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
    try:
        while ingestor.stats.records < expected and time.monotonic() < deadline:
            ingestor.run_once()
    finally:
        ingestor.close()
        source.close()
        dead_letters.close()
    return ingestor


def stop_process(process: subprocess.Popen[str]) -> str:
    """SIGTERM, wait (killed after a minute), and the process's log (its stderr)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    return stderr


def load_events(path: Path) -> list[dict[str, Any]]:
    loaded = json.loads(path.read_text())
    return loaded if isinstance(loaded, list) else [loaded]


DUMP_QUERIES = {
    "datasets": """SELECT n.name, d.name, d.type, d.database_name, d.table_name, d.current_version, d.facets
                   FROM datasets d JOIN namespaces n ON n.id = d.namespace_id""",
    "fields": """SELECT d.name, f.name, f.type, f.from_schema FROM dataset_fields f JOIN datasets d ON d.id = f.dataset_id""",
    "jobs": """SELECT n.name, j.name, j.type, j.current_version, j.facets, r.uuid
               FROM jobs j JOIN namespaces n ON n.id = j.namespace_id LEFT JOIN runs r ON r.id = (SELECT l.id FROM runs l WHERE l.job_id = j.id ORDER BY l.created_at DESC, l.uuid DESC LIMIT 1)""",
    "runs": """SELECT r.uuid, j.name, r.run_seq, r.state, r.started_at, r.ended_at, r.facets, r.parent_run_uuid
               FROM runs r JOIN jobs j ON j.id = r.job_id""",
    "job_io": """SELECT j.name, d.name, io.direction, io.first_seen
                 FROM job_io io JOIN jobs j ON j.id = io.job_id JOIN datasets d ON d.id = io.dataset_id""",
    "column_lineage": """SELECT od.name, of.name, id.name, inf.name, c.transformation_type, c.transformation_subtype,
                                c.masking, j.name
                         FROM column_lineage c JOIN datasets od ON od.id = c.output_dataset_id
                         LEFT JOIN dataset_fields of ON of.id = c.output_field_id
                         JOIN datasets id ON id.id = c.input_dataset_id JOIN dataset_fields inf ON inf.id = c.input_field_id
                         JOIN jobs j ON j.id = c.job_id""",
    "snapshot_lineage": """SELECT r.uuid, j.name, s.barrier_id, d.name, s.direction, s.snapshot_id, s.kind, s.partitions, s.created_at
                           FROM snapshot_lineage s JOIN runs r ON r.id = s.run_id JOIN jobs j ON j.id = s.job_id
                           JOIN datasets d ON d.id = s.dataset_id""",
    "dataset_versions": """SELECT d.name, v.version, r.uuid, v.facets, c.fields, c.facets FROM dataset_versions v
                           JOIN datasets d ON d.id = v.dataset_id LEFT JOIN runs r ON r.id = v.run_id
                           JOIN dataset_version_contents c ON c.id = v.content_id""",
    "partition_lineage": """SELECT r.uuid, s.barrier_id, d.name, p.direction, p.partition_name
                            FROM partition_lineage p JOIN snapshot_lineage s ON s.id = p.snapshot_lineage_id
                            JOIN runs r ON r.id = s.run_id JOIN datasets d ON d.id = p.dataset_id""",
}


def dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived store as sorted tuples of natural keys and values."""
    with store.engine.connect() as connection:
        return {
            name: sorted((tuple(_plain(value) for value in row) for row in connection.execute(text(query))), key=repr)
            for name, query in DUMP_QUERIES.items()
        }


def _plain(value: Any) -> Any:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes) and value.startswith(FACETS_V1):
        value = decompress_facets(value)
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if hasattr(value, "isoformat"):
        return value.isoformat() if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None).isoformat()
    return value


def metric_value(exposition: str, name: str, **labels: str) -> float | None:
    """One sample of a Prometheus text exposition (labels in any order), None when absent."""
    for line in exposition.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        sample, _, value = line.rpartition(" ")
        sample_name, _, label_text = sample.partition("{")
        found = dict(pair.split("=", 1) for pair in label_text.rstrip("}").split(",") if pair)
        if sample_name == name and {key: text.strip('"') for key, text in found.items()} == labels:
            return float(value)
    return None


def outbox_size(store_url: str) -> int:
    """Change messages the changes topic has not acknowledged yet."""
    from consumer.store import open_store, outbox

    store = open_store(store_url, migrate=False)
    try:
        with store.engine.connect() as connection:
            return outbox.count(connection)
    finally:
        store.dispose()
