"""Pure: a batch of materialized events -> the rows it gives each table, by natural key.

Everything here is a function of the batch alone; what the store already holds (row ids, stored
values, run numbers) is merged in by the writer (consumer.store.writer), under the same rules:
- times: `created_at`/`first_seen` are the earliest event time, `updated_at`/`last_seen` the
  latest;
- values and facets of jobs, datasets and runs merge key by key, each key holding the value of
  the newest event that carried it (a non-null value); `times` keep each key's event time;
- run state: the latest terminal event's state, else the highest of NEW < RUNNING;
- a dataset version keeps what its earliest event said; a snapshot row what its newest said.
Events of one entity with the same event time are the one limit: the one later in the batch wins
(`Folded` keeps the batch's order for that).

A folded batch is plain data (tuples, dicts, strings, datetimes), so it is cheap to build in a
worker process and hand to the one that writes (consumer.ingest.prepare)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from consumer import json_codec
from consumer.ingest.materialize import EventRows, FieldRow, JobRow
from consumer.store.compressed_text import Dictionary, compress
from consumer.store.rows import (
    DATASET_VALUES,
    JOB_VALUES,
    RUN_VALUES,
    DatasetKey,
    EntityFold,
    FieldFold,
    Folded,
    JobKey,
    LineageFold,
    Merged,
    RawEvent,
    RawFold,
    RunFold,
    SnapshotFold,
    VersionFold,
    lineage_content,
    lineage_hash,
    lock_id,
    next_state,
    run_version,
    state_hash,
    version_content,
    version_content_hash,
)

FieldKey = tuple[DatasetKey, str]  # (dataset, field name)


def fold(events: Sequence[EventRows], *, by_hash: bool = True, dictionary: Dictionary | None = None) -> Folded:
    """Fold `events` (the first of each content hash) in the order the store applies them: by
    content hash (ingestion), or as given (`by_hash=False`: replay, in event-time order). Raw
    events are compressed with `dictionary` (the store's current one), if given."""
    unique: dict[str, EventRows] = {}
    for rows in events:
        unique.setdefault(rows.raw.content_hash, rows)
    batch = [unique[key] for key in sorted(unique)] if by_hash else list(unique.values())
    edge_datasets = [_edge_datasets(rows) for rows in batch]  # three tables need them
    runs = _runs(batch)
    return Folded(
        events=len(batch),
        hashes=tuple(sorted(unique)),
        lock_ids=_lock_ids(batch, edge_datasets),
        raw=tuple(_raw(rows.raw, dictionary) for rows in batch),
        namespaces=_namespaces(batch, edge_datasets),
        datasets=_datasets(batch, edge_datasets),
        fields=_fields(batch),
        jobs=_jobs(batch, runs),
        runs=runs,
        versions=_versions(batch),
        # built here, beside the rest of the batch, not on the writer's thread
        lineage={uuid: run_version(run_lineage) for uuid, run_lineage in _run_lineage(batch).items()},
        declared=_declared_lineage(batch),
        snapshots=_snapshots(batch),
        partitions=_partitions(batch),
    )


def _raw(raw: RawEvent, dictionary: Dictionary | None) -> RawFold:
    """The raw event's row, its payload compressed (here, in the worker process, not by the store's writer)."""
    return (*raw[:-1], compress(raw.payload, dictionary))


def _lock_ids(batch: Sequence[EventRows], edge_datasets: Sequence[set[DatasetKey]]) -> tuple[int, ...]:
    keys: set[tuple[str, Any]] = set()
    for rows, named in zip(batch, edge_datasets, strict=True):
        if rows.job:
            keys.add(("job", (rows.job.namespace, rows.job.name)))
        if rows.run:
            keys.add(("run", rows.run.uuid))
        keys.update(("dataset", (dataset.namespace, dataset.name)) for dataset in rows.datasets)
        keys.update(("dataset", key) for key in named)
    return tuple(sorted({lock_id(kind, key) for kind, key in keys}))


def _edge_datasets(rows: EventRows) -> set[DatasetKey]:
    """The datasets an event's column-lineage edges name."""
    return {edge.input for edge in rows.column_edges} | {edge.output for edge in rows.column_edges}


def _widen(spans: dict[Any, tuple[datetime, datetime]], key: Any, time: datetime) -> None:
    first, last = spans.get(key, (time, time))
    spans[key] = (min(first, time), max(last, time))


def _namespaces(batch: Sequence[EventRows], edge_datasets: Sequence[set[DatasetKey]]) -> dict[str, tuple[datetime, datetime]]:
    spans: dict[str, tuple[datetime, datetime]] = {}
    for rows, named in zip(batch, edge_datasets, strict=True):
        names = {d.namespace for d in rows.datasets} | {dataset[0] for dataset in named}
        names |= {rows.job.namespace} if rows.job else set()
        for name in names:
            _widen(spans, name, rows.event_time)
    return spans


def _datasets(batch: Sequence[EventRows], edge_datasets: Sequence[set[DatasetKey]]) -> dict[DatasetKey, EntityFold]:
    merged: dict[DatasetKey, Merged] = {}
    named: dict[DatasetKey, tuple[datetime, datetime]] = {}
    for rows, by_edges in zip(batch, edge_datasets, strict=True):
        for dataset in rows.datasets:
            key = (dataset.namespace, dataset.name)
            change = {column: getattr(dataset, column) for column in DATASET_VALUES if column != "current_version"}
            change["current_version"] = dataset.version
            merged.setdefault(key, Merged({}, {}, {})).add(rows.event_time, change, dataset.facets)
            _widen(named, key, rows.event_time)
        for key in by_edges:
            _widen(named, key, rows.event_time)
    nothing = Merged({}, {}, {})  # a dataset known only from edges
    return {key: EntityFold(merged.get(key, nothing), named[key][0], named[key][1]) for key in sorted(named)}


def _jobs(batch: Sequence[EventRows], runs: dict[str, RunFold]) -> dict[JobKey, EntityFold]:
    merged: dict[JobKey, Merged] = {}
    seen: dict[JobKey, tuple[datetime, datetime]] = {}
    states: dict[JobKey, set[int | None]] = defaultdict(set)
    for rows in batch:
        job = rows.job
        if job is None:
            continue
        key = (job.namespace, job.name)
        merged.setdefault(key, Merged({}, {}, {})).add(rows.event_time, _job_values(job), job.facets)
        _widen(seen, key, rows.event_time)
        states[key].add(runs[rows.run.uuid].job_state if rows.run else None)
    return {key: EntityFold(merged[key], *seen[key], _uniform(states[key])) for key in sorted(merged)}


def _job_values(job: JobRow) -> dict[str, Any]:
    return {
        **{column: getattr(job, column) for column in JOB_VALUES if column != "current_version"},
        "current_version": job.version,
    }


def _uniform(states: set[int | None]) -> int | None:
    return next(iter(states)) if len(states) == 1 else None


def _runs(batch: Sequence[EventRows]) -> dict[str, RunFold]:
    events_by_run: dict[str, list[EventRows]] = defaultdict(list)
    for rows in batch:
        if rows.run:
            events_by_run[rows.run.uuid].append(rows)
    return {uuid: _fold_run(events_by_run[uuid]) for uuid in sorted(events_by_run)}


def _fold_run(run_events: list[EventRows]) -> RunFold:
    first_job = run_events[0].job
    assert first_job is not None  # noqa: S101 - validated events have a job (narrows the type)
    state, started_at, ended_at = "NEW", None, None
    merged = Merged({}, {}, {})
    job_states: set[int | None] = set()
    for rows in sorted(run_events, key=lambda rows: rows.event_time):
        run, job, time = rows.run, rows.job, rows.event_time
        assert run is not None and job is not None  # noqa: S101 - validated run events have a run and a job (narrows the type)
        state, ended_at = next_state(state, ended_at, run.state, time)
        if run.event_type in ("START", "RUNNING"):
            started_at = min(filter(None, (started_at, time)))
        change = {column: getattr(run, column) for column in RUN_VALUES if column != "job_version"}
        merged.add(time, {**change, "job_version": job.version}, run.facets)
        same_job = (job.namespace, job.name) == (first_job.namespace, first_job.name)
        job_states.add(state_hash(_job_values(job), job.facets) if same_job else None)
    times = [rows.event_time for rows in run_events]
    first = (first_job.namespace, first_job.name)
    return RunFold(first, state, started_at, ended_at, merged, min(times), max(times), _uniform(job_states))


def _fields(batch: Sequence[EventRows]) -> tuple[FieldFold, ...]:
    """One row per (dataset, field): created_at = the earliest event naming it, updated_at and
    type/description/tags = the newest schema carrying it (a field known only from column-lineage
    edges: the newest edge). Per dataset, its schema's fields first, in schema order, then the
    fields known from edges: a new dataset's field ids (the order readers list them in) follow its
    schema."""
    folded: dict[FieldKey, list[Any]] = {}
    # Most events of a batch repeat a dataset's schema: each distinct field list once, with its time span.
    # (Field tags are lists: schemas are compared, not hashed.)
    schemas: dict[DatasetKey, list[list[Any]]] = defaultdict(list)
    for rows in batch:
        for dataset in rows.datasets:
            if not dataset.fields:
                continue
            seen = schemas[(dataset.namespace, dataset.name)]
            for entry in seen:
                if entry[0] == dataset.fields:
                    entry[1], entry[2] = min(entry[1], rows.event_time), max(entry[2], rows.event_time)
                    break
            else:
                seen.append([dataset.fields, rows.event_time, rows.event_time])
    for dataset_key, entries in schemas.items():
        for fields, first, last in sorted(entries, key=lambda entry: entry[1]):
            for field in fields:
                _fold_field(folded, (dataset_key, field.name), first, last, field)
    for key, (first, last) in _edge_field_spans(batch).items():
        _fold_field(folded, key, first, last, None)
    return tuple((key[0], key[1], *values) for key, values in folded.items())


def _edge_field_spans(batch: Sequence[EventRows]) -> dict[FieldKey, list[datetime]]:
    """Every field a column-lineage edge of the batch names, with the first and last time one did."""
    spans: dict[FieldKey, list[datetime]] = {}
    for rows in batch:
        time = rows.event_time
        named = {(edge.input, edge.input_field) for edge in rows.column_edges}
        named.update((edge.output, edge.output_field) for edge in rows.column_edges if edge.output_field is not None)
        for key in named:
            span = spans.get(key)
            if span is None:
                spans[key] = [time, time]
            elif time < span[0]:
                span[0] = time
            elif time > span[1]:
                span[1] = time
    return spans


# The positions of a field's values in `_fold_field`'s lists.
_TYPE, _DESCRIPTION, _TAGS, _FROM_SCHEMA, _CREATED, _UPDATED = range(6)


def _fold_field(
    folded: dict[FieldKey, list[Any]], key: FieldKey, first: datetime, last: datetime, field: FieldRow | None
) -> None:
    """Fold one mention of a field (from a schema, or from an edge when `field` is None) into the
    batch's row for it (the same rule the store's upsert applies)."""
    current = folded.get(key)
    if current is None:
        folded[key] = current = [None, None, None, False, first, last]
        if field is None:
            return
    current[_CREATED] = min(current[_CREATED], first)
    from_schema = field is not None
    take = (from_schema and (not current[_FROM_SCHEMA] or last >= current[_UPDATED])) or (
        not from_schema and not current[_FROM_SCHEMA] and last >= current[_UPDATED]
    )
    if take:
        current[_UPDATED] = last
        if field is not None:
            current[_TYPE], current[_DESCRIPTION], current[_FROM_SCHEMA] = field.type, field.description, True
            if field.tags is not None:
                current[_TAGS] = field.tags


def _versions(batch: Sequence[EventRows]) -> tuple[VersionFold, ...]:
    """Each version keeps what its earliest event said (and the run of that event, for an output)."""
    found: dict[tuple[DatasetKey, str], VersionFold] = {}
    for rows in batch:
        for dataset in rows.datasets:
            if dataset.version is None:
                continue
            key = ((dataset.namespace, dataset.name), dataset.version)
            if key in found and found[key][7] <= rows.event_time:
                continue
            fields = None if dataset.fields is None else _fields_json(dataset.fields)
            content, own = version_content(dataset.facets)
            found[key] = (
                key[0],
                dataset.version,
                rows.run.uuid if rows.run and dataset.direction == "output" else None,
                version_content_hash(fields, content),
                fields,
                content,
                own,
                rows.event_time,
            )
    return tuple(found[key] for key in sorted(found))


def _fields_json(fields: Sequence[FieldRow]) -> bytes:
    return json_codec.dumps_bytes(
        [{"name": f.name, "type": f.type, "description": f.description, "tags": f.tags} for f in fields]
    )


def _lineage(rows: EventRows) -> LineageFold | None:
    """What one event says its job read, wrote and derived; None when it names none of it."""
    job = rows.job
    if job is None or not (rows.datasets or rows.column_edges):
        return None
    inputs = frozenset((d.namespace, d.name) for d in rows.datasets if d.direction == "input")
    outputs = frozenset((d.namespace, d.name) for d in rows.datasets if d.direction == "output")
    edges = frozenset(
        (e.output, e.output_field, e.input, e.input_field, e.type, e.subtype, e.description, e.masking) for e in rows.column_edges
    )
    schemas = frozenset(
        ((d.namespace, d.name), tuple((f.name, f.type) for f in d.fields)) for d in rows.datasets if d.fields is not None
    )
    return LineageFold((job.namespace, job.name), inputs, outputs, edges, rows.event_time, schemas)


def _run_lineage(batch: Sequence[EventRows]) -> dict[str, LineageFold]:
    """Per run, the union of what its events of the batch say (the job is the run's first event's)."""
    found: dict[str, LineageFold] = {}
    for rows in sorted((rows for rows in batch if rows.run), key=lambda rows: rows.event_time):
        lineage = _lineage(rows)
        if lineage is None:
            continue
        assert rows.run is not None  # noqa: S101 - filtered above (narrows the type)
        known = found.get(rows.run.uuid)
        found[rows.run.uuid] = lineage if known is None else known.union(lineage)
    return {uuid: found[uuid] for uuid in sorted(found)}


def _declared_lineage(batch: Sequence[EventRows]) -> dict[JobKey, LineageFold]:
    """Per job, what its newest JobEvent of the batch declared (equal times: the larger content)."""
    found: dict[JobKey, LineageFold] = {}
    for rows in batch:
        lineage = None if rows.run else _lineage(rows)
        if lineage is None:
            continue
        known = found.get(lineage.job)
        if known is None or (lineage.time, lineage_hash(lineage_content(lineage))) > (
            known.time,
            lineage_hash(lineage_content(known)),
        ):
            found[lineage.job] = lineage
    return found


def _snapshots(batch: Sequence[EventRows]) -> tuple[SnapshotFold, ...]:
    """Per run, barrier, dataset and direction, what its newest event said."""
    found: dict[tuple[str, int | None, DatasetKey, str], SnapshotFold] = {}
    for position, rows in enumerate(batch):
        if not rows.run or not rows.job:
            continue
        for snapshot in rows.snapshots:
            key = (rows.run.uuid, snapshot.batch_id, snapshot.dataset, snapshot.direction)
            if key in found and found[key][10] > rows.event_time:
                continue
            found[key] = (
                rows.run.uuid,
                (rows.job.namespace, rows.job.name),
                snapshot.batch_id,
                snapshot.dataset,
                snapshot.direction,
                snapshot.snapshot_id,
                snapshot.kind,
                snapshot.partitions,
                snapshot.start_offset,
                snapshot.end_offset,
                rows.event_time,
                position,
            )
    return tuple(found[key] for key in sorted(found, key=lambda key: (key[0], key[1] is not None, key[1] or 0, key[2], key[3])))


def _partitions(batch: Sequence[EventRows]) -> dict[tuple[str, int | None, DatasetKey, str], frozenset[str]]:
    """The partitions each run, barrier, dataset and direction read or wrote: the union over its
    events (so any order or batching of them gives the same rows)."""
    wanted: dict[tuple[str, int | None, DatasetKey, str], set[str]] = defaultdict(set)
    for rows in batch:
        if not rows.run or not rows.job:
            continue
        for snapshot in rows.snapshots:
            if snapshot.partition_names:
                wanted[(rows.run.uuid, snapshot.batch_id, snapshot.dataset, snapshot.direction)].update(snapshot.partition_names)
    return {key: frozenset(names) for key, names in wanted.items()}
