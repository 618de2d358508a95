"""The write side of the store: one batch of materialized events -> a fixed, small number of
set-based statements per table (one upsert for all its rows, see store/bulk.py, and one keyed
select for the row ids), all in the caller's transaction.

Every derived row is a function of the SET of events stored, never of their order, batching or
arrival time, so any permutation of the same events, split into any batches by any number of
writers, builds the same store:
- times: `created_at`/`first_seen` are the earliest event time, `updated_at`/`last_seen` the
  latest (a dataset's `updated_at`: its latest own event; only a dataset known from column-lineage
  edges alone takes the edges' times);
- values and facets of jobs, datasets and runs merge key by key, each key holding the value of the
  newest event that carried it (a non-null value); `merged_at` keeps each key's event time;
- run state: the latest terminal event's state, else the highest of NEW < RUNNING;
- a job's runs are numbered 1, 2, ... (`run_seq`) in the order of their first event time (ties by
  run id), renumbered when an earlier run arrives late; `latest_run_id` is the run started last;
- a dataset version keeps what its earliest event said.
Events of one entity with the same event time are the one limit: the one written last wins.

On PostgreSQL several writers may write at once: each transaction first takes advisory locks on
the jobs, datasets and runs of its batch in one global (sorted) order, and every upsert sends its
rows sorted by key, so row locks are taken in one order too: no deadlocks, no lost updates."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Table, and_, bindparam, case, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from consumer.materialize import STATE_RANK, TERMINAL_STATES, DatasetKey, EventRows
from consumer.store.bulk import execute_many, overlapped
from consumer.store.schema import (
    column_lineage,
    dataset_fields,
    dataset_versions,
    datasets,
    job_io,
    jobs,
    lineage_events,
    namespaces,
    partition_lineage,
    run_states,
    runs,
    snapshot_lineage,
)

CHUNK = 500
BATCH_WORK_MEM = "64MB"
_DATASET_VALUES = ("type", "source_name", "source_uri", "description", "database_name", "table_name", "current_version")
_JOB_VALUES = ("type", "integration", "job_type", "description", "location", "current_version")
_RUN_VALUES = (
    "nominal_start_time",
    "nominal_end_time",
    "parent_run_uuid",
    "parent_job_namespace",
    "parent_job_name",
    "job_version",
)


def write_batch(connection: Connection, batch: Sequence[EventRows], *, store_raw: bool = True) -> int:
    """Upsert `batch` (raw events too unless `store_raw` is False, as in replay); the number of
    events that were new. Events already stored are skipped whole."""
    writer = _BatchWriter(connection)
    unique = _unique(batch)
    writer.size_memory()
    writer.lock_keys(unique)
    fresh = writer.not_stored(unique) if store_raw else unique
    if fresh:
        writer.derived(fresh, store_raw=store_raw)
    return len(fresh)


def _unique(batch: Sequence[EventRows]) -> list[EventRows]:
    seen: dict[str, EventRows] = {}
    for rows in batch:
        seen.setdefault(rows.raw.content_hash, rows)
    return list(seen.values())


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _lock_id(kind: str, key: Any) -> int:
    digest = hashlib.blake2b(f"{kind}\x00{key!r}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# A facet's key in `merged_at` (values' keys are their column names).
_FACET = "facets."


class _Merged:
    """Values merged key by key, each key holding the newest event's non-null value; `times`
    (ISO strings, the `merged_at` column) record which event time each key came from."""

    def __init__(self, values: Mapping[str, Any], facets: Mapping[str, Any], times: Mapping[str, str]) -> None:
        self.values = dict(values)
        self.facets = dict(facets)
        self.times = dict(times)

    @classmethod
    def stored(cls, row: Mapping[str, Any] | None, columns: Iterable[str]) -> _Merged:
        if row is None:
            return cls({}, {}, {})
        values = {column: row[column] for column in columns}
        facets = dict(row["facets"] or {})
        times = row.get("merged_at")
        if times is None:  # written before merged_at existed: everything as of its last update
            at = _stamp(row["updated_at"])
            times = {key: at for key, value in values.items() if value is not None}
            times.update({f"{_FACET}{key}": at for key in facets})
        return cls(values, facets, times)

    def add(self, time: datetime, values: Mapping[str, Any], facets: Mapping[str, Any]) -> None:
        at = _stamp(time)
        for key, value in values.items():
            if value is not None and at >= self.times.get(key, ""):
                self.values[key], self.times[key] = value, at
        for key, value in facets.items():
            if value is not None and at >= self.times.get(f"{_FACET}{key}", ""):
                self.facets[key], self.times[f"{_FACET}{key}"] = value, at

    def newest(self) -> datetime | None:
        newest = max(self.times.values(), default=None)
        return None if newest is None else datetime.strptime(newest, _STAMP).replace(tzinfo=timezone.utc)


# Below any number _number_runs uses while it renumbers (it passes through -1, -2, ...).
_PROVISIONAL_SEQ = -1_000_000_000
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width: stamps compare as text in time order


@lru_cache(maxsize=8192)  # a batch stamps each event's time once per entity it touches
def _stamp(time: datetime) -> str:
    return time.astimezone(timezone.utc).strftime(_STAMP)


def _keeps_stored_facets(merged_at: Mapping[str, str] | None, incoming: Iterable[tuple[datetime, Mapping[str, Any]]]) -> bool:
    """Whether a stored facet survives merging `incoming` (time, facets) into its row: one the
    batch does not carry (non-null) at the same or a later time (_Merged.add's rule)."""
    if merged_at is None:  # written before merged_at existed
        return True
    newest: dict[str, str] = {}
    for time, facets in incoming:
        at = _stamp(time)
        for key, value in facets.items():
            if value is not None and at > newest.get(key, ""):
                newest[key] = at
    return any(
        newest.get(key.removeprefix(_FACET), "") < stored_at for key, stored_at in merged_at.items() if key.startswith(_FACET)
    )


class _BatchWriter:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.dialect = connection.dialect.name
        self.insert: Callable[[Table], Any] = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        self.now = datetime.now(timezone.utc)

    def many(self, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        execute_many(self.connection, statement, rows)

    def size_memory(self) -> None:
        """PostgreSQL: room for a batch's column arrays (a batch of events is megabytes of text),
        which otherwise spill to temporary files while unnest reads them; this transaction only."""
        if self.dialect == "postgresql":
            self.connection.execute(text(f"SET LOCAL work_mem = '{BATCH_WORK_MEM}'"))

    # concurrency -------------------------------------------------------------------------
    def lock_keys(self, batch: Sequence[EventRows]) -> None:
        """PostgreSQL: transaction advisory locks on every job, dataset and run of the batch, in
        ascending lock-id order (the one global order all writers share). SQLite has one writer."""
        if self.dialect != "postgresql":
            return
        keys: set[tuple[str, Any]] = set()
        for rows in batch:
            if rows.job:
                keys.add(("job", (rows.job.namespace, rows.job.name)))
            if rows.run:
                keys.add(("run", rows.run.uuid))
            keys.update(("dataset", (dataset.namespace, dataset.name)) for dataset in rows.datasets)
            keys.update(("dataset", key) for key in _edge_datasets(rows))
        ids = {_lock_id(kind, key) for kind, key in keys}
        if ids:
            self.connection.execute(
                text(
                    "SELECT count(pg_advisory_xact_lock(id)) FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id ORDER BY 1) AS ordered"
                ),
                {"ids": sorted(ids)},
            )

    # raw events -------------------------------------------------------------------------
    def not_stored(self, batch: Sequence[EventRows]) -> list[EventRows]:
        """The events whose raw event is not stored yet, by hash (the rest are skipped whole)."""
        hashes = sorted(rows.raw.content_hash for rows in batch)
        stored: set[str] = set()
        for chunk in _chunks(hashes):
            stored.update(
                self.connection.execute(
                    select(lineage_events.c.content_hash).where(lineage_events.c.content_hash.in_(chunk))
                ).scalars()
            )
        return sorted((rows for rows in batch if rows.raw.content_hash not in stored), key=lambda rows: rows.raw.content_hash)

    def raw_events(self, fresh: Sequence[EventRows]) -> None:
        self.many(
            self.insert(lineage_events).on_conflict_do_nothing(index_elements=["content_hash"]),
            [{**_raw_values(rows), "received_at": self.now} for rows in fresh],
        )

    # derived stores ---------------------------------------------------------------------
    def derived(self, batch: Sequence[EventRows], *, store_raw: bool) -> None:
        namespace_ids = self.namespaces(batch)
        dataset_ids = self.datasets(batch, namespace_ids)
        field_ids = self.fields(batch, dataset_ids)
        job_ids = self.jobs(batch, namespace_ids)
        run_ids, run_seqs = self.runs(batch, job_ids)
        # Nothing in this block reads back: each statement runs while the next one's rows are built.
        with overlapped(self.connection):
            if store_raw:
                self.raw_events(batch)
            self.run_states(batch, run_ids)
            self.dataset_versions(batch, dataset_ids, run_ids)
            self.job_io(batch, job_ids, dataset_ids, run_ids)
            self.column_lineage(batch, job_ids, dataset_ids, field_ids, run_ids)
            self.snapshots(batch, job_ids, dataset_ids, run_ids, run_seqs)
        self.partitions(batch, dataset_ids, run_ids, run_seqs)
        self.latest_runs(set(job_ids.values()))

    def _earliest_latest(self, table: Table, first: str, last: str) -> dict[str, Any]:
        statement = self.insert(table)
        excluded = statement.excluded
        return {
            first: case((excluded[first] < table.c[first], excluded[first]), else_=table.c[first]),
            last: case((excluded[last] > table.c[last], excluded[last]), else_=table.c[last]),
        }

    def namespaces(self, batch: Sequence[EventRows]) -> dict[str, int]:
        span: dict[str, tuple[datetime, datetime]] = {}
        for rows in batch:
            names = {d.namespace for d in rows.datasets} | {dataset[0] for dataset in _edge_datasets(rows)}
            names |= {rows.job.namespace} if rows.job else set()
            for name in names:
                _widen(span, name, rows.event_time)
        statement = self.insert(namespaces)
        statement = statement.on_conflict_do_update(
            index_elements=["name"], set_=self._earliest_latest(namespaces, "created_at", "updated_at")
        )
        self.many(statement, [{"name": name, "created_at": span[name][0], "updated_at": span[name][1]} for name in sorted(span)])
        return self._select_ids(namespaces, [namespaces.c.name], sorted(span))

    def _select_ids(self, table: Table, key_columns: list[Any], keys: Sequence[Any]) -> dict[Any, int]:
        columns = [table.c.id, *key_columns]
        return {key: row["id"] for key, row in self._existing(table, key_columns, keys, columns).items()}

    def _existing(
        self, table: Table, key_columns: list[Any], keys: Sequence[Any], columns: Sequence[Any] | None = None
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows (`columns`, default all) by natural key. Two-column keys are looked up as
        `a IN (..) AND b IN (..)` and filtered here: PostgreSQL plans row-value IN lists poorly."""
        found: dict[Any, dict[str, Any]] = {}
        wanted = set(keys)
        for chunk in _chunks(sorted(wanted, key=repr)):
            if len(key_columns) == 1:
                condition = key_columns[0].in_(chunk)
            else:
                condition = and_(
                    *(column.in_(sorted({key[i] for key in chunk}, key=repr)) for i, column in enumerate(key_columns))
                )
            query = select(*columns) if columns is not None else select(table)
            for row in self.connection.execute(query.where(condition)).mappings():
                key = row[key_columns[0].name] if len(key_columns) == 1 else tuple(row[c.name] for c in key_columns)
                if key in wanted:
                    found[key] = dict(row)
        return found

    def _stored_for_merge(
        self, table: Table, key_columns: list[Any], incoming: Mapping[Any, Iterable[tuple[datetime, Mapping[str, Any]]]]
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows by natural key, to merge the batch's `incoming` (time, facets) per key into.
        A row's facets (large JSON: schemas, column lineage) are read only where one of its stored
        facets outlives the batch; where the batch carries a newer value of every one, the merge
        needs none of them."""
        found = self._existing(table, key_columns, list(incoming), [column for column in table.c if column.name != "facets"])
        kept = sorted(row["id"] for key, row in found.items() if _keeps_stored_facets(row["merged_at"], incoming[key]))
        facets: dict[int, Any] = {}
        for chunk in _chunks(kept):
            facets.update(self.connection.execute(select(table.c.id, table.c.facets).where(table.c.id.in_(chunk))).all())
        for row in found.values():
            row["facets"] = facets.get(row["id"])
        return found

    def _upsert(self, table: Table, key_names: list[str], values: list[dict[str, Any]]) -> dict[Any, int]:
        """Insert or overwrite `values` (already merged with what was stored), in key order; ids by natural key."""
        if not values:
            return {}
        values = sorted(values, key=lambda v: tuple(v[name] for name in key_names))
        statement = self.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=key_names,
            set_={name: statement.excluded[name] for name in values[0] if name not in key_names},
        )
        self.many(statement, values)
        key_columns = [table.c[name] for name in key_names]
        keys = [tuple(v[name] for name in key_names) if len(key_names) > 1 else v[key_names[0]] for v in values]
        return self._select_ids(table, key_columns, keys)

    def datasets(self, batch: Sequence[EventRows], namespace_ids: dict[str, int]) -> dict[DatasetKey, int]:
        own: dict[DatasetKey, list[tuple[datetime, dict[str, Any], Mapping[str, Any]]]] = defaultdict(list)
        referenced: dict[DatasetKey, tuple[datetime, datetime]] = {}
        for rows in batch:
            for dataset in rows.datasets:
                change = {column: getattr(dataset, column) for column in _DATASET_VALUES if column != "current_version"}
                change["current_version"] = dataset.version
                own[(dataset.namespace, dataset.name)].append((rows.event_time, change, dataset.facets))
            for dataset_key in _edge_datasets(rows):
                _widen(referenced, dataset_key, rows.event_time)
        wanted = sorted(own.keys() | referenced.keys())
        existing = self._stored_for_merge(
            datasets,
            [datasets.c.namespace_id, datasets.c.name],
            {(namespace_ids[ns], n): [(time, facets) for time, _, facets in own.get((ns, n), ())] for ns, n in wanted},
        )
        values = []
        for namespace, name in wanted:
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            merged = _Merged.stored(current, _DATASET_VALUES)
            times = [time for time, _, _ in own.get((namespace, name), ())]
            for time, change, facets in own.get((namespace, name), ()):
                merged.add(time, change, facets)
            edge_times = list(referenced.get((namespace, name), ()))
            created = min([*times, *edge_times, *([current["created_at"]] if current else [])])
            updated = merged.newest()
            if updated is None:  # known only from column-lineage edges
                updated = max([*edge_times, *([current["updated_at"]] if current else [])])
            row = {column: merged.values.get(column) for column in _DATASET_VALUES}
            row["type"] = row["type"] or "DB_TABLE"
            row["database_name"] = row["database_name"] or namespace
            row["table_name"] = row["table_name"] or name
            values.append(
                {
                    "namespace_id": key[0],
                    "name": name,
                    "is_deleted": False,
                    **row,
                    "facets": merged.facets,
                    "merged_at": merged.times,
                    "created_at": created,
                    "updated_at": updated,
                }
            )
        ids = self._upsert(datasets, ["namespace_id", "name"], values)
        return {(ns, name): ids[(namespace_ids[ns], name)] for ns, name in wanted}

    def fields(self, batch: Sequence[EventRows], dataset_ids: dict[DatasetKey, int]) -> dict[tuple[int, str], int]:
        """One row per (dataset, field): created_at = the earliest event naming it, updated_at and
        type/description/tags = the newest schema carrying it (a field known only from column-lineage
        edges: the newest edge); tags the schema leaves out keep those set through the API."""
        rows_by_key: dict[tuple[int, str], dict[str, Any]] = {}
        # Most events of a batch repeat a dataset's schema: each distinct field list once, with its time span.
        # (Field tags are lists: schemas are compared, not hashed.)
        schemas: dict[int, list[list[Any]]] = defaultdict(list)
        for rows in batch:
            for dataset in rows.datasets:
                if not dataset.fields:
                    continue
                seen = schemas[dataset_ids[(dataset.namespace, dataset.name)]]
                for entry in seen:
                    if entry[0] == dataset.fields:
                        entry[1], entry[2] = min(entry[1], rows.event_time), max(entry[2], rows.event_time)
                        break
                else:
                    seen.append([dataset.fields, rows.event_time, rows.event_time])
        # Schema fields first, in schema order, then fields known from edges: a new dataset's field
        # ids (the order readers list them in) follow its schema.
        for dataset_id, entries in schemas.items():
            for fields, first, last in sorted(entries, key=lambda entry: entry[1]):
                for field in fields:
                    _fold_field(rows_by_key, (dataset_id, field.name), first, last, field)
        for key, (first, last) in _edge_field_spans(batch, dataset_ids).items():
            _fold_field(rows_by_key, key, first, last, None)
        if rows_by_key:
            statement = self.insert(dataset_fields)
            excluded = statement.excluded
            stored = dataset_fields.c
            # The incoming schema is newer, or the stored row came from edges alone.
            take = or_(
                and_(excluded.from_schema, or_(~stored.from_schema, excluded.updated_at >= stored.updated_at)),
                and_(~excluded.from_schema, ~stored.from_schema, excluded.updated_at >= stored.updated_at),
            )
            statement = statement.on_conflict_do_update(
                index_elements=["dataset_id", "name"],
                set_={
                    "type": case((take, excluded.type), else_=stored.type),
                    "description": case((take, excluded.description), else_=stored.description),
                    "tags": case((and_(take, excluded.tags.is_not(None)), excluded.tags), else_=stored.tags),
                    "from_schema": or_(stored.from_schema, excluded.from_schema),
                    "updated_at": case((take, excluded.updated_at), else_=stored.updated_at),
                    "created_at": case((excluded.created_at < stored.created_at, excluded.created_at), else_=stored.created_at),
                },
            )
            # By dataset (each one's rows are guarded by its advisory lock, so their order within it is free).
            self.many(statement, sorted(rows_by_key.values(), key=lambda row: row["dataset_id"]))
        return self._field_ids(sorted({dataset_id for dataset_id, _ in rows_by_key}))

    def _field_ids(self, dataset_id_list: list[int]) -> dict[tuple[int, str], int]:
        columns = (dataset_fields.c.dataset_id, dataset_fields.c.name, dataset_fields.c.id)
        found: dict[tuple[int, str], int] = {}
        for chunk in _chunks(dataset_id_list):
            for dataset_id, name, field_id in self.connection.execute(
                select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))
            ):
                found[(dataset_id, name)] = field_id
        return found

    def jobs(self, batch: Sequence[EventRows], namespace_ids: dict[str, int]) -> dict[tuple[str, str], int]:
        updates: dict[tuple[str, str], list[EventRows]] = defaultdict(list)
        for rows in batch:
            if rows.job:
                updates[(rows.job.namespace, rows.job.name)].append(rows)
        if not updates:
            return {}
        wanted = sorted(updates)
        existing = self._stored_for_merge(
            jobs,
            [jobs.c.namespace_id, jobs.c.name],
            {
                (namespace_ids[ns], n): [(rows.event_time, rows.job.facets) for rows in updates[(ns, n)] if rows.job]
                for ns, n in wanted
            },
        )
        values = []
        for namespace, name in wanted:
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            merged = _Merged.stored(current, _JOB_VALUES)
            times = [rows.event_time for rows in updates[(namespace, name)]]
            for rows in updates[(namespace, name)]:
                job = rows.job
                assert job is not None
                change = {column: getattr(job, column) for column in _JOB_VALUES if column != "current_version"}
                merged.add(rows.event_time, {**change, "current_version": job.version}, job.facets)
            if current:
                times += [current["created_at"], current["last_seen"]]
            values.append(
                {
                    "namespace_id": key[0],
                    "name": name,
                    **{column: merged.values.get(column) for column in _JOB_VALUES},
                    "facets": merged.facets,
                    "merged_at": merged.times,
                    "created_at": min(times),
                    "updated_at": max(times),
                    "last_seen": max(times),
                    "lineage_retired_at": None,
                }
            )
        ids = self._upsert(jobs, ["namespace_id", "name"], values)
        return {(ns, name): ids[(namespace_ids[ns], name)] for ns, name in wanted}

    def runs(self, batch: Sequence[EventRows], job_ids: dict[tuple[str, str], int]) -> tuple[dict[str, int], dict[str, int]]:
        events_by_run: dict[str, list[EventRows]] = defaultdict(list)
        for rows in batch:
            if rows.run:
                events_by_run[rows.run.uuid].append(rows)
        if not events_by_run:
            return {}, {}
        existing = self._stored_for_merge(
            runs,
            [runs.c.uuid],
            {
                uuid: [(rows.event_time, rows.run.facets) for rows in run_events if rows.run]
                for uuid, run_events in events_by_run.items()
            },
        )
        values: list[dict[str, Any]] = []
        for run_uuid in sorted(events_by_run):
            run_events = events_by_run[run_uuid]
            job = run_events[0].job
            assert job is not None
            current = existing.get(run_uuid)
            job_id = current["job_id"] if current else job_ids[(job.namespace, job.name)]
            # A new run takes a free, provisional number; _number_runs puts every run in its place.
            run_seq = current["run_seq"] if current else _PROVISIONAL_SEQ - len(values)
            values.append({"uuid": run_uuid, "job_id": job_id, "run_seq": run_seq, **_fold_run(current, run_events)})
        self._upsert(runs, ["uuid"], values)
        self._number_runs(values, existing)
        numbered = self.connection.execute(
            select(runs.c.uuid, runs.c.id, runs.c.run_seq).where(runs.c.uuid.in_(sorted(events_by_run)))
        ).all()
        return {row.uuid: row.id for row in numbered}, {row.uuid: row.run_seq for row in numbered}

    def _number_runs(self, values: list[dict[str, Any]], stored: dict[str, dict[str, Any]]) -> None:
        """Number each touched job's runs 1, 2, ... by (first event time, run id). Usually the
        runs that are new (or now start earlier) all come after the job's other runs: they take the
        next numbers (one grouped query for all jobs). Otherwise every run of the job from the
        earliest moved one on is renumbered. Batch runs' barrier ids follow their number."""
        moved_by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for value in values:
            current = stored.get(value["uuid"])
            if current is None or value["created_at"] < current["created_at"]:
                moved_by_job[value["job_id"]].append(value)
        if not moved_by_job:
            return
        moved_uuids = sorted(value["uuid"] for moved in moved_by_job.values() for value in moved)
        others = {
            row.job_id: (row.latest, row.others)
            for row in self.connection.execute(
                select(runs.c.job_id, func.max(runs.c.created_at).label("latest"), func.count().label("others"))
                .where(runs.c.job_id.in_(sorted(moved_by_job)), runs.c.uuid.not_in(moved_uuids))
                .group_by(runs.c.job_id)
            )
        }
        moves: list[tuple[int, int, int]] = []  # (run id, old number, new number)
        appended: list[dict[str, Any]] = []
        for job_id, moved in sorted(moved_by_job.items()):
            latest, count = others.get(job_id, (None, 0))
            moved.sort(key=lambda value: (value["created_at"], value["uuid"]))
            if latest is None or moved[0]["created_at"] > latest:
                appended += [{"moved_uuid": value["uuid"], "seq": count + rank} for rank, value in enumerate(moved, 1)]
            else:
                moves += self._renumbering(job_id, moved[0]["created_at"], moved[0]["uuid"])
        if appended:
            statement = update(runs).where(runs.c.uuid == bindparam("moved_uuid")).values(run_seq=bindparam("seq"))
            if any(value["moved_uuid"] in stored for value in appended):
                # a stored run that now starts earlier but still after all the others may take the
                # number of another appended run: through negative numbers, as below
                self.many(statement, [{**value, "seq": -value["seq"]} for value in appended])
            self.many(statement, appended)
            # a stored run among them may have changed its number (a new run now starts before it)
            self._renumber_snapshots(
                [(run["id"], run["run_seq"], value["seq"]) for value in appended if (run := stored.get(value["moved_uuid"]))]
            )
        if not moves:
            return
        statement = update(runs).where(runs.c.id == bindparam("moved")).values(run_seq=bindparam("seq"))
        # Through negative numbers: no two runs of a job ever share one (uq_runs_job_seq).
        self.many(statement, [{"moved": run_id, "seq": -new} for run_id, _, new in moves])
        self.many(statement, [{"moved": run_id, "seq": new} for run_id, _, new in moves])
        self._renumber_snapshots(moves)

    def _renumber_snapshots(self, moves: list[tuple[int, int, int]]) -> None:
        """A batch run's snapshots carry its number as barrier id (a streaming run's carry micro-batch
        ids): follow each (run id, old number, new number) that changed from a number a run kept
        (not a provisional negative one)."""
        moves = [(run_id, old, new) for run_id, old, new in moves if 0 < old != new]
        if not moves:
            return
        moved_facets = dict(
            self.connection.execute(
                select(runs.c.id, runs.c.facets).where(runs.c.id.in_([run_id for run_id, _, _ in moves]))
            ).all()
        )
        renumbered = [
            {"moved": run_id, "old": old, "new": new}
            for run_id, old, new in moves
            if "microBatch" not in (moved_facets.get(run_id) or {})
        ]
        if renumbered:
            self.many(
                update(snapshot_lineage)
                .where(snapshot_lineage.c.run_id == bindparam("moved"), snapshot_lineage.c.barrier_id == bindparam("old"))
                .values(barrier_id=bindparam("new")),
                renumbered,
            )

    def _renumbering(self, job_id: int, since: datetime, since_uuid: str) -> list[tuple[int, int, int]]:
        """(run id, old number, new number) of the job's runs from (since, since_uuid) on that move."""
        before = (runs.c.created_at < since) | ((runs.c.created_at == since) & (runs.c.uuid < since_uuid))
        placed = self.connection.execute(
            select(func.count()).select_from(runs).where(runs.c.job_id == job_id, before)
        ).scalar_one()
        later = self.connection.execute(
            select(runs.c.id, runs.c.run_seq).where(runs.c.job_id == job_id, ~before).order_by(runs.c.created_at, runs.c.uuid)
        ).all()
        return [(row.id, row.run_seq, placed + rank) for rank, row in enumerate(later, 1) if row.run_seq != placed + rank]

    def run_states(self, batch: Sequence[EventRows], run_ids: dict[str, int]) -> None:
        values = {
            (run_ids[rows.run.uuid], rows.run.event_type, rows.event_time): {
                "run_id": run_ids[rows.run.uuid],
                "event_type": rows.run.event_type,
                "state": rows.run.state,
                "transitioned_at": rows.event_time,
            }
            for rows in batch
            if rows.run
        }
        if values:
            self.many(
                self.insert(run_states).on_conflict_do_nothing(index_elements=["run_id", "event_type", "transitioned_at"]),
                [values[key] for key in sorted(values)],
            )

    def dataset_versions(self, batch: Sequence[EventRows], dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int]) -> None:
        """Each version keeps what its earliest event said (and the run of that event, for an output)."""
        values: dict[tuple[int, str], dict[str, Any]] = {}
        for rows in batch:
            for dataset in rows.datasets:
                if dataset.version is None:
                    continue
                dataset_id = dataset_ids[(dataset.namespace, dataset.name)]
                key = (dataset_id, dataset.version)
                if key in values and values[key]["created_at"] <= rows.event_time:
                    continue
                values[key] = {
                    "dataset_id": dataset_id,
                    "version": dataset.version,
                    "run_id": run_ids.get(rows.run.uuid) if rows.run and dataset.direction == "output" else None,
                    "fields": None
                    if dataset.fields is None
                    else [{"name": f.name, "type": f.type, "description": f.description, "tags": f.tags} for f in dataset.fields],
                    "facets": dataset.facets,
                    "created_at": rows.event_time,
                }
        if values:
            statement = self.insert(dataset_versions)
            excluded = statement.excluded
            statement = statement.on_conflict_do_update(
                index_elements=["dataset_id", "version"],
                set_={name: excluded[name] for name in ("run_id", "fields", "facets", "created_at")},
                where=excluded.created_at < dataset_versions.c.created_at,
            )
            self.many(statement, [values[key] for key in sorted(values)])

    def job_io(
        self,
        batch: Sequence[EventRows],
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        run_ids: dict[str, int],
    ) -> None:
        values: dict[tuple[int, int, str], dict[str, Any]] = {}
        for rows in batch:
            if not rows.job:
                continue
            job_id = job_ids[(rows.job.namespace, rows.job.name)]
            run_id = run_ids.get(rows.run.uuid) if rows.run else None
            for dataset in rows.datasets:
                key = (job_id, dataset_ids[(dataset.namespace, dataset.name)], dataset.direction or "input")
                _span(values, key, rows.event_time, run_id, {"job_id": key[0], "dataset_id": key[1], "direction": key[2]})
        self._upsert_spans(job_io, ["job_id", "dataset_id", "direction"], [values[key] for key in sorted(values)])

    def _upsert_spans(
        self,
        table: Table,
        key_names: list[str],
        values: list[dict[str, Any]],
        *,
        index_where: Any = None,
        newest_columns: Iterable[str] = (),
    ) -> None:
        """Upsert edge rows keeping the earliest first_seen and the latest last_seen, and taking
        last_run_id (and `newest_columns`) from whichever side was seen last."""
        if not values:
            return
        statement = self.insert(table)
        excluded = statement.excluded
        newer = excluded.last_seen >= table.c.last_seen
        set_ = {
            "first_seen": case((excluded.first_seen < table.c.first_seen, excluded.first_seen), else_=table.c.first_seen),
            "last_seen": case((newer, excluded.last_seen), else_=table.c.last_seen),
            "last_run_id": case((newer, excluded.last_run_id), else_=table.c.last_run_id),
        }
        for column in newest_columns:
            set_[column] = case((newer, excluded[column]), else_=table.c[column])
        statement = statement.on_conflict_do_update(index_elements=key_names, index_where=index_where, set_=set_)
        self.many(statement, values)

    def column_lineage(
        self,
        batch: Sequence[EventRows],
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        field_ids: dict[tuple[int, str], int],
        run_ids: dict[str, int],
    ) -> None:
        per_field: dict[tuple[Any, ...], dict[str, Any]] = {}
        per_dataset: dict[tuple[Any, ...], dict[str, Any]] = {}
        for rows in batch:
            if not rows.job:
                continue
            job_id = job_ids[(rows.job.namespace, rows.job.name)]
            run_id = run_ids.get(rows.run.uuid) if rows.run else None
            time = rows.event_time
            for edge in rows.column_edges:
                output_id = dataset_ids[edge.output]
                input_id = dataset_ids[edge.input]
                input_field_id = field_ids[(input_id, edge.input_field)]
                output_field_id = None if edge.output_field is None else field_ids[(output_id, edge.output_field)]
                spans = per_dataset if output_field_id is None else per_field
                key = (output_id if output_field_id is None else output_field_id, input_field_id, edge.type, edge.subtype)
                current = spans.get(key)
                if current is not None:  # seen in this batch: only an earlier or newer sighting changes it
                    if time < current["first_seen"]:
                        current["first_seen"] = time
                    if time < current["last_seen"]:
                        continue
                row = {
                    "output_dataset_id": output_id,
                    "output_field_id": output_field_id,
                    "input_dataset_id": input_id,
                    "input_field_id": input_field_id,
                    "transformation_type": edge.type,
                    "transformation_subtype": edge.subtype,
                    "transformation_description": edge.description,
                    "masking": edge.masking,
                    "job_id": job_id,
                }
                _span(spans, key, time, run_id, row)
        newest = ("transformation_description", "masking", "job_id")
        self._upsert_spans(
            column_lineage,
            ["output_field_id", "input_field_id", "transformation_type", "transformation_subtype"],
            [per_field[key] for key in sorted(per_field)],
            index_where=column_lineage.c.output_field_id.isnot(None),
            newest_columns=newest,
        )
        self._upsert_spans(
            column_lineage,
            ["output_dataset_id", "input_field_id", "transformation_type", "transformation_subtype"],
            [per_dataset[key] for key in sorted(per_dataset)],
            index_where=column_lineage.c.output_field_id.is_(None),
            newest_columns=newest,
        )

    def snapshots(
        self,
        batch: Sequence[EventRows],
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        run_ids: dict[str, int],
        run_seqs: dict[str, int],
    ) -> None:
        values: dict[tuple[Any, ...], dict[str, Any]] = {}
        for rows in batch:
            if not rows.run or not rows.job:
                continue
            run_id = run_ids[rows.run.uuid]
            for snapshot in rows.snapshots:
                barrier_id = snapshot.batch_id if snapshot.batch_id is not None else run_seqs[rows.run.uuid]
                key = (run_id, barrier_id, dataset_ids[snapshot.dataset], snapshot.direction)
                if key in values and values[key]["created_at"] > rows.event_time:
                    continue
                values[key] = {
                    "run_id": run_id,
                    "job_id": job_ids[(rows.job.namespace, rows.job.name)],
                    "barrier_id": barrier_id,
                    "dataset_id": key[2],
                    "direction": snapshot.direction,
                    "snapshot_id": snapshot.snapshot_id,
                    "kind": snapshot.kind,
                    "partitions": snapshot.partitions,
                    "start_offset": snapshot.start_offset,
                    "end_offset": snapshot.end_offset,
                    "created_at": rows.event_time,
                }
        if not values:
            return
        statement = self.insert(snapshot_lineage)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["run_id", "barrier_id", "dataset_id", "direction"],
            set_={
                name: excluded[name] for name in ("snapshot_id", "kind", "partitions", "start_offset", "end_offset", "created_at")
            },
            where=excluded.created_at >= snapshot_lineage.c.created_at,
        )
        self.many(statement, [values[key] for key in sorted(values)])

    def partitions(
        self,
        batch: Sequence[EventRows],
        dataset_ids: dict[DatasetKey, int],
        run_ids: dict[str, int],
        run_seqs: dict[str, int],
    ) -> None:
        """The partitions each snapshot_lineage row's run read or wrote: the union over its events
        (so any order or batching of them gives the same rows), keyed to that row."""
        wanted: dict[tuple[int, int, int, str], set[str]] = defaultdict(set)
        for rows in batch:
            if not rows.run or not rows.job:
                continue
            for snapshot in rows.snapshots:
                if snapshot.partition_names:
                    barrier_id = snapshot.batch_id if snapshot.batch_id is not None else run_seqs[rows.run.uuid]
                    key = (run_ids[rows.run.uuid], barrier_id, dataset_ids[snapshot.dataset], snapshot.direction)
                    wanted[key].update(snapshot.partition_names)
        if not wanted:
            return
        c = snapshot_lineage.c
        snapshot_ids = self._select_ids(snapshot_lineage, [c.run_id, c.barrier_id, c.dataset_id, c.direction], sorted(wanted))
        values = [
            {"snapshot_lineage_id": snapshot_ids[key], "dataset_id": key[2], "direction": key[3], "partition_name": name}
            for key in sorted(wanted)
            for name in sorted(wanted[key])
        ]
        statement = self.insert(partition_lineage).on_conflict_do_nothing(
            index_elements=["snapshot_lineage_id", "partition_name"]
        )
        self.many(statement, values)

    def latest_runs(self, job_id_set: set[int]) -> None:
        if not job_id_set:
            return
        newest_run = (
            select(runs.c.id)
            .where(runs.c.job_id == jobs.c.id)
            .order_by(runs.c.created_at.desc(), runs.c.uuid.desc())
            .limit(1)
            .scalar_subquery()
        )
        self.connection.execute(update(jobs).where(jobs.c.id.in_(sorted(job_id_set))).values(latest_run_id=newest_run))


def _fold_run(current: Mapping[str, Any] | None, run_events: list[EventRows]) -> dict[str, Any]:
    state = current["state"] if current else "NEW"
    started_at = current["started_at"] if current else None
    ended_at = current["ended_at"] if current else None
    times = [current["created_at"], current["updated_at"]] if current else []
    merged = _Merged.stored(current, _RUN_VALUES)
    for rows in sorted(run_events, key=lambda rows: rows.event_time):
        run, job, time = rows.run, rows.job, rows.event_time
        assert run is not None and job is not None
        times.append(time)
        if run.state in TERMINAL_STATES:
            if state not in TERMINAL_STATES or ended_at is None or time >= ended_at:
                state = run.state
            ended_at = max(filter(None, (ended_at, time)))
        elif STATE_RANK[run.state] > STATE_RANK[state]:
            state = run.state
        if run.event_type in ("START", "RUNNING"):
            started_at = min(filter(None, (started_at, time)))
        change = {column: getattr(run, column) for column in _RUN_VALUES if column != "job_version"}
        merged.add(time, {**change, "job_version": job.version}, run.facets)
    return {
        "state": state,
        "started_at": started_at,
        "ended_at": ended_at,
        **{column: merged.values.get(column) for column in _RUN_VALUES},
        "facets": merged.facets,
        "merged_at": merged.times,
        "created_at": min(times),
        "updated_at": max(times),
    }


def _edge_datasets(rows: EventRows) -> set[DatasetKey]:
    """The datasets an event's column-lineage edges name."""
    return {edge.input for edge in rows.column_edges} | {edge.output for edge in rows.column_edges}


def _edge_field_spans(batch: Sequence[EventRows], dataset_ids: dict[DatasetKey, int]) -> dict[tuple[int, str], list[datetime]]:
    """Every field a column-lineage edge of the batch names, with the first and last time one did."""
    spans: dict[tuple[int, str], list[datetime]] = {}
    for rows in batch:
        time = rows.event_time
        named = {(edge.input, edge.input_field) for edge in rows.column_edges}
        named.update((edge.output, edge.output_field) for edge in rows.column_edges if edge.output_field is not None)
        for dataset, field in named:
            key = (dataset_ids[dataset], field)
            span = spans.get(key)
            if span is None:
                spans[key] = [time, time]
            elif time < span[0]:
                span[0] = time
            elif time > span[1]:
                span[1] = time
    return spans


def _widen(spans: dict[Any, tuple[datetime, datetime]], key: Any, time: datetime) -> None:
    first, last = spans.get(key, (time, time))
    spans[key] = (min(first, time), max(last, time))


def _fold_field(
    rows_by_key: dict[tuple[int, str], dict[str, Any]], key: tuple[int, str], first: datetime, last: datetime, field: Any
) -> None:
    """Fold one mention of a field into the batch's row for it (the same rule the upsert applies)."""
    current = rows_by_key.get(key)
    if current is None:
        rows_by_key[key] = current = {
            "dataset_id": key[0],
            "name": key[1],
            "type": None,
            "description": None,
            "tags": None,
            "from_schema": False,
            "created_at": first,
            "updated_at": last,
        }
        if field is None:
            return
    current["created_at"] = min(current["created_at"], first)
    from_schema = field is not None
    take = (from_schema and (not current["from_schema"] or last >= current["updated_at"])) or (
        not from_schema and not current["from_schema"] and last >= current["updated_at"]
    )
    if take:
        current["updated_at"] = last
        if from_schema:
            current.update(type=field.type, description=field.description, from_schema=True)
            if field.tags is not None:
                current["tags"] = field.tags


def _span(values: dict[Any, dict[str, Any]], key: Any, time: datetime, run_id: int | None, row: dict[str, Any]) -> None:
    """Collapse repeated edges of one batch into one row spanning their times."""
    current = values.get(key)
    if current is None:
        values[key] = {**row, "first_seen": time, "last_seen": time, "last_run_id": run_id}
        return
    current["first_seen"] = min(current["first_seen"], time)
    if time >= current["last_seen"]:
        current.update(row, last_seen=time, last_run_id=run_id)


def _raw_values(rows: EventRows) -> dict[str, Any]:
    raw = rows.raw
    return {
        "content_hash": raw.content_hash,
        "event_time": raw.event_time,
        "kind": raw.kind,
        "event_type": raw.event_type,
        "run_uuid": raw.run_uuid,
        "job_namespace": raw.job_namespace,
        "job_name": raw.job_name,
        "payload": raw.payload,
    }
