"""The write side of the store: one batch of materialized events -> idempotent upserts, all in
the caller's transaction. Re-applying any event leaves every row as it was; events of one run
arriving in any order converge (terminal states win, times are min/max'd, facets of the newer
event win key by key)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import Connection, Table, and_, case, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from consumer.materialize import STATE_RANK, TERMINAL_STATES, DatasetKey, EventRows
from consumer.store.schema import (
    column_lineage,
    dataset_fields,
    dataset_versions,
    datasets,
    job_io,
    jobs,
    lineage_events,
    namespaces,
    run_states,
    runs,
    snapshot_lineage,
)

CHUNK = 500


def write_batch(connection: Connection, batch: Sequence[EventRows], *, store_raw: bool = True) -> int:
    """Upsert `batch` (raw events too unless `store_raw` is False, as in replay); the number of
    events that were new. Events already stored are skipped whole."""
    writer = _BatchWriter(connection)
    fresh = writer.raw_events(batch) if store_raw else _unique(batch)
    if fresh:
        writer.derived(fresh)
    return len(fresh)


def utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes: they are UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=timezone.utc)


def _unique(batch: Sequence[EventRows]) -> list[EventRows]:
    seen: dict[str, EventRows] = {}
    for rows in batch:
        seen.setdefault(rows.raw.content_hash, rows)
    return list(seen.values())


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


def _newer_wins(current: dict[str, Any], current_time: datetime | None, new: Mapping[str, Any], new_time: datetime) -> dict[str, Any]:
    """Fold `new` into `current`: the newer side's non-null values win, the older fills gaps."""
    if current_time is None or new_time >= current_time:
        return {key: (new.get(key) if new.get(key) is not None else current.get(key)) for key in current.keys() | new.keys()}
    return {key: (current.get(key) if current.get(key) is not None else new.get(key)) for key in current.keys() | new.keys()}


class _BatchWriter:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        dialect = connection.dialect.name
        self.insert: Callable[[Table], Any] = postgresql.insert if dialect == "postgresql" else sqlite.insert
        self.now = datetime.now(timezone.utc)

    # raw events -------------------------------------------------------------------------
    def raw_events(self, batch: Sequence[EventRows]) -> list[EventRows]:
        unique = _unique(batch)
        hashes = [rows.raw.content_hash for rows in unique]
        stored: set[str] = set()
        for chunk in _chunks(hashes):
            stored.update(self.connection.execute(
                select(lineage_events.c.content_hash).where(lineage_events.c.content_hash.in_(chunk))
            ).scalars())
        fresh = [rows for rows in unique if rows.raw.content_hash not in stored]
        if fresh:
            self.connection.execute(
                self.insert(lineage_events).on_conflict_do_nothing(index_elements=["content_hash"]),
                [{**_raw_values(rows), "received_at": self.now} for rows in fresh],
            )
        return fresh

    # derived stores ---------------------------------------------------------------------
    def derived(self, batch: Sequence[EventRows]) -> None:
        namespace_ids = self.namespaces(batch)
        dataset_ids = self.datasets(batch, namespace_ids)
        field_ids = self.fields(batch, dataset_ids)
        job_ids = self.jobs(batch, namespace_ids)
        run_ids, run_seqs = self.runs(batch, job_ids)
        self.run_states(batch, run_ids)
        self.dataset_versions(batch, dataset_ids, run_ids)
        self.job_io(batch, job_ids, dataset_ids, run_ids)
        self.column_lineage(batch, job_ids, dataset_ids, field_ids, run_ids)
        self.snapshots(batch, job_ids, dataset_ids, run_ids, run_seqs)
        self.latest_runs(set(job_ids.values()))

    def namespaces(self, batch: Sequence[EventRows]) -> dict[str, int]:
        first_seen: dict[str, datetime] = {}
        for rows in batch:
            names = {d.namespace for d in rows.datasets} | {e.input[0] for e in rows.column_edges}
            names |= {e.output[0] for e in rows.column_edges} | ({rows.job.namespace} if rows.job else set())
            for name in names:
                first_seen[name] = min(first_seen.get(name, rows.event_time), rows.event_time)
        ids = self._select_ids(namespaces, [namespaces.c.name], sorted(first_seen))
        missing = [name for name in sorted(first_seen) if name not in ids]
        if missing:
            self.connection.execute(
                self.insert(namespaces).on_conflict_do_nothing(index_elements=["name"]),
                [{"name": name, "created_at": first_seen[name], "updated_at": first_seen[name]} for name in missing],
            )
            ids.update(self._select_ids(namespaces, [namespaces.c.name], missing))
        return ids

    def _select_ids(self, table: Table, key_columns: list[Any], keys: Sequence[Any]) -> dict[Any, int]:
        return {key: row["id"] for key, row in self._existing(table, key_columns, keys).items()}

    def datasets(self, batch: Sequence[EventRows], namespace_ids: dict[str, int]) -> dict[DatasetKey, int]:
        updates: dict[DatasetKey, list[tuple[datetime, dict[str, Any]]]] = defaultdict(list)
        referenced: dict[DatasetKey, datetime] = {}
        for rows in batch:
            for dataset in rows.datasets:
                updates[(dataset.namespace, dataset.name)].append((rows.event_time, {
                    "type": dataset.type, "source_name": dataset.source_name, "source_uri": dataset.source_uri,
                    "description": dataset.description, "database_name": dataset.database_name,
                    "table_name": dataset.table_name, "current_version": dataset.version, "facets": dataset.facets,
                }))
            for edge in rows.column_edges:
                for key in (edge.input, edge.output):
                    referenced[key] = min(referenced.get(key, rows.event_time), rows.event_time)
                    if key not in updates:
                        updates[key] = []
        keys = [(namespace_ids[ns], name) for ns, name in updates]
        existing = self._existing(datasets, [datasets.c.namespace_id, datasets.c.name], keys)
        values = []
        for (namespace, name), changes in updates.items():
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            if current is None:
                if not changes:
                    changes = [(referenced[(namespace, name)], {"database_name": namespace, "table_name": name, "facets": {}})]
                current = {"facets": {}, "created_at": min(t for t, _ in changes), "updated_at": None}
            merged = self._fold(current, changes)
            values.append({
                "namespace_id": key[0], "name": name, "is_deleted": False,
                **{column: merged.get(column) for column in (
                    "type", "source_name", "source_uri", "description", "database_name", "table_name",
                    "current_version", "facets", "created_at", "updated_at")},
            })
            values[-1]["type"] = values[-1]["type"] or "DB_TABLE"
        ids = self._upsert(datasets, ["namespace_id", "name"], values)
        by_key = {(ns, name): ids[(namespace_ids[ns], name)] for ns, name in updates}
        return by_key

    def _existing(self, table: Table, key_columns: list[Any], keys: Sequence[Any]) -> dict[Any, dict[str, Any]]:
        """Stored rows by natural key. Two-column keys are looked up as `a IN (..) AND b IN (..)`
        and filtered here: PostgreSQL plans row-value IN lists poorly."""
        found: dict[Any, dict[str, Any]] = {}
        wanted = set(keys)
        for chunk in _chunks(sorted(wanted, key=repr)):
            if len(key_columns) == 1:
                condition = key_columns[0].in_(chunk)
            else:
                condition = and_(*(column.in_(sorted({key[i] for key in chunk}, key=repr)) for i, column in enumerate(key_columns)))
            for row in self.connection.execute(select(table).where(condition)).mappings():
                key = row[key_columns[0].name] if len(key_columns) == 1 else tuple(row[c.name] for c in key_columns)
                if key in wanted:
                    found[key] = dict(row)
        return found

    def _fold(self, current: dict[str, Any], changes: list[tuple[datetime, dict[str, Any]]]) -> dict[str, Any]:
        merged = dict(current)
        merged_time = utc(current.get("updated_at"))
        merged["created_at"] = utc(current.get("created_at"))
        for event_time, change in sorted(changes, key=lambda item: item[0]):
            facets = _newer_wins(dict(merged.get("facets") or {}), merged_time, change.get("facets") or {}, event_time)
            merged = _newer_wins(merged, merged_time, {k: v for k, v in change.items() if k != "facets"}, event_time)
            merged["facets"] = facets
            merged["created_at"] = min(filter(None, (merged.get("created_at"), event_time)))
            merged_time = max(filter(None, (merged_time, event_time)))
        merged["updated_at"] = merged_time or self.now
        merged["created_at"] = merged["created_at"] or merged["updated_at"]
        return merged

    def _upsert(self, table: Table, key_names: list[str], values: list[dict[str, Any]]) -> dict[Any, int]:
        """Insert or overwrite `values` (already merged with what was stored); ids by natural key."""
        if not values:
            return {}
        statement = self.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=key_names,
            set_={name: statement.excluded[name] for name in values[0] if name not in key_names},
        )
        self.connection.execute(statement, values)
        key_columns = [table.c[name] for name in key_names]
        keys = [tuple(v[name] for name in key_names) if len(key_names) > 1 else v[key_names[0]] for v in values]
        return self._select_ids(table, key_columns, keys)

    def fields(self, batch: Sequence[EventRows], dataset_ids: dict[DatasetKey, int]) -> dict[tuple[int, str], int]:
        # Most events of a batch repeat a dataset's schema: each distinct field list once, at its newest time.
        schemas: dict[int, list[list[Any]]] = defaultdict(list)
        edge_only: dict[tuple[int, str], datetime] = {}
        for rows in batch:
            for dataset in rows.datasets:
                if not dataset.fields:
                    continue
                seen = schemas[dataset_ids[(dataset.namespace, dataset.name)]]
                for entry in seen:
                    if entry[0] == dataset.fields:
                        entry[1] = max(entry[1], rows.event_time)
                        break
                else:
                    seen.append([dataset.fields, rows.event_time])
            for edge in rows.column_edges:
                keys = [(dataset_ids[edge.input], edge.input_field)]
                if edge.output_field is not None:
                    keys.append((dataset_ids[edge.output], edge.output_field))
                for key in keys:
                    edge_only[key] = min(edge_only.get(key, rows.event_time), rows.event_time)
        newest: dict[tuple[int, str], dict[str, Any]] = {}
        for dataset_id, entries in schemas.items():
            for fields, event_time in entries:
                for field in fields:
                    key = (dataset_id, field.name)
                    if key in newest and newest[key]["updated_at"] > event_time:
                        continue
                    newest[key] = {
                        "dataset_id": dataset_id, "name": field.name, "type": field.type,
                        "description": field.description, "tags": field.tags, "from_schema": True,
                        "created_at": event_time, "updated_at": event_time,
                    }
        wanted = newest.keys() | edge_only.keys()
        stored = self._stored_fields(sorted({dataset_id for dataset_id, _ in wanted}))
        for key, row in newest.items():  # a schema without tags keeps the tags users set through the API
            if not row["tags"] and key in stored and stored[key]["tags"]:
                row["tags"] = stored[key]["tags"]
        # Most events repeat a schema the store already holds: write only what changed.
        changed = [row for key, row in newest.items() if _field_changed(stored.get(key), row)]
        if changed:
            statement = self.insert(dataset_fields)
            statement = statement.on_conflict_do_update(
                index_elements=["dataset_id", "name"],
                set_={name: statement.excluded[name] for name in ("type", "description", "tags", "from_schema", "updated_at")},
                where=statement.excluded.updated_at >= dataset_fields.c.updated_at,
            )
            self.connection.execute(statement, changed)
        missing = sorted(edge_only.keys() - stored.keys() - newest.keys())
        if missing:
            self.connection.execute(
                self.insert(dataset_fields).on_conflict_do_nothing(index_elements=["dataset_id", "name"]),
                [{"dataset_id": d, "name": n, "from_schema": False, "created_at": edge_only[(d, n)],
                  "updated_at": edge_only[(d, n)]} for d, n in missing],
            )
        field_ids = {key: row["id"] for key, row in stored.items()}
        new_keys = wanted - stored.keys()
        if new_keys:
            field_ids.update(self._field_ids(sorted({dataset_id for dataset_id, _ in new_keys})))
        return field_ids

    def _stored_fields(self, dataset_id_list: list[int]) -> dict[tuple[int, str], dict[str, Any]]:
        columns = [dataset_fields.c[name] for name in ("id", "dataset_id", "name", "type", "description", "tags",
                                                      "from_schema", "updated_at")]
        stored: dict[tuple[int, str], dict[str, Any]] = {}
        for chunk in _chunks(dataset_id_list):
            for row in self.connection.execute(select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))).mappings():
                stored[(row["dataset_id"], row["name"])] = dict(row)
        return stored

    def _field_ids(self, dataset_id_list: list[int]) -> dict[tuple[int, str], int]:
        columns = (dataset_fields.c.dataset_id, dataset_fields.c.name, dataset_fields.c.id)
        found: dict[tuple[int, str], int] = {}
        for chunk in _chunks(dataset_id_list):
            for dataset_id, name, field_id in self.connection.execute(select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))):
                found[(dataset_id, name)] = field_id
        return found

    def jobs(self, batch: Sequence[EventRows], namespace_ids: dict[str, int]) -> dict[tuple[str, str], int]:
        updates: dict[tuple[str, str], list[tuple[datetime, dict[str, Any]]]] = defaultdict(list)
        for rows in batch:
            if rows.job:
                job = rows.job
                updates[(job.namespace, job.name)].append((rows.event_time, {
                    "type": job.type, "integration": job.integration, "job_type": job.job_type,
                    "description": job.description, "location": job.location,
                    "current_version": job.version, "facets": job.facets,
                }))
        if not updates:
            return {}
        keys = [(namespace_ids[ns], name) for ns, name in updates]
        existing = self._existing(jobs, [jobs.c.namespace_id, jobs.c.name], keys)
        values = []
        for (namespace, name), changes in updates.items():
            key = (namespace_ids[namespace], name)
            current = existing.get(key) or {"facets": {}, "updated_at": None, "created_at": None}
            merged = self._fold(current, changes)
            last_seen = max(filter(None, (utc(current.get("last_seen")), merged["updated_at"])))
            values.append({
                "namespace_id": key[0], "name": name, "last_seen": last_seen, "lineage_retired_at": None,
                **{column: merged.get(column) for column in (
                    "type", "integration", "job_type", "description", "location", "current_version",
                    "facets", "created_at", "updated_at")},
            })
        ids = self._upsert(jobs, ["namespace_id", "name"], values)
        return {(ns, name): ids[(namespace_ids[ns], name)] for ns, name in updates}

    def runs(self, batch: Sequence[EventRows], job_ids: dict[tuple[str, str], int]) -> tuple[dict[str, int], dict[str, int]]:
        events_by_run: dict[str, list[EventRows]] = defaultdict(list)
        for rows in batch:
            if rows.run:
                events_by_run[rows.run.uuid].append(rows)
        if not events_by_run:
            return {}, {}
        existing = self._existing(runs, [runs.c.uuid], list(events_by_run))
        next_seq = self._next_run_seqs({job_ids[(e[0].job.namespace, e[0].job.name)] for e in events_by_run.values()})
        values = []
        for run_uuid, run_events in events_by_run.items():
            job_id = job_ids[(run_events[0].job.namespace, run_events[0].job.name)]
            current = existing.get(run_uuid)
            if current is None:
                current = {"run_seq": next_seq[job_id], "facets": {}, "state": "NEW", "updated_at": None, "created_at": None}
                next_seq[job_id] += 1
            values.append({"uuid": run_uuid, "job_id": job_id, **self._fold_run(current, run_events)})
        self._upsert(runs, ["uuid"], values)
        rows = self.connection.execute(
            select(runs.c.uuid, runs.c.id, runs.c.run_seq).where(runs.c.uuid.in_(list(events_by_run)))
        ).all()
        return {row.uuid: row.id for row in rows}, {row.uuid: row.run_seq for row in rows}

    def _next_run_seqs(self, job_id_set: set[int]) -> dict[int, int]:
        found = dict(self.connection.execute(
            select(runs.c.job_id, func.max(runs.c.run_seq)).where(runs.c.job_id.in_(sorted(job_id_set))).group_by(runs.c.job_id)
        ).all())
        return {job_id: (found.get(job_id) or 0) + 1 for job_id in job_id_set}

    def _fold_run(self, current: dict[str, Any], run_events: list[EventRows]) -> dict[str, Any]:
        state = current["state"]
        started_at = utc(current.get("started_at"))
        ended_at = utc(current.get("ended_at"))
        changes = []
        for rows in run_events:
            run = rows.run
            assert run is not None and rows.job is not None
            time = rows.event_time
            if run.state in TERMINAL_STATES:
                if state not in TERMINAL_STATES or ended_at is None or time >= ended_at:
                    state = run.state
                ended_at = max(filter(None, (ended_at, time)))
            elif STATE_RANK[run.state] > STATE_RANK[state]:
                state = run.state
            if run.event_type in ("START", "RUNNING"):
                started_at = min(filter(None, (started_at, time)))
            changes.append((time, {
                "facets": run.facets, "nominal_start_time": run.nominal_start_time,
                "nominal_end_time": run.nominal_end_time, "parent_run_uuid": run.parent_run_uuid,
                "parent_job_namespace": run.parent_job_namespace, "parent_job_name": run.parent_job_name,
                "job_version": rows.job.version,
            }))
        merged = self._fold(current, changes)
        return {
            "run_seq": current["run_seq"], "state": state, "started_at": started_at, "ended_at": ended_at,
            **{column: merged.get(column) for column in (
                "facets", "nominal_start_time", "nominal_end_time", "parent_run_uuid", "parent_job_namespace",
                "parent_job_name", "job_version", "created_at", "updated_at")},
        }

    def run_states(self, batch: Sequence[EventRows], run_ids: dict[str, int]) -> None:
        values = {
            (run_ids[rows.run.uuid], rows.run.event_type, rows.event_time): {
                "run_id": run_ids[rows.run.uuid], "event_type": rows.run.event_type,
                "state": rows.run.state, "transitioned_at": rows.event_time,
            }
            for rows in batch if rows.run
        }
        if values:
            self.connection.execute(
                self.insert(run_states).on_conflict_do_nothing(index_elements=["run_id", "event_type", "transitioned_at"]),
                list(values.values()),
            )

    def dataset_versions(self, batch: Sequence[EventRows], dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int]) -> None:
        values: dict[tuple[int, str], dict[str, Any]] = {}
        for rows in batch:
            for dataset in rows.datasets:
                if dataset.version is None:
                    continue
                dataset_id = dataset_ids[(dataset.namespace, dataset.name)]
                run_id = run_ids.get(rows.run.uuid) if rows.run and dataset.direction == "output" else None
                values.setdefault((dataset_id, dataset.version), {
                    "dataset_id": dataset_id, "version": dataset.version, "run_id": run_id,
                    "fields": None if dataset.fields is None else [
                        {"name": f.name, "type": f.type, "description": f.description, "tags": f.tags} for f in dataset.fields
                    ],
                    "facets": dataset.facets, "created_at": rows.event_time,
                })
        if values:
            self.connection.execute(
                self.insert(dataset_versions).on_conflict_do_nothing(index_elements=["dataset_id", "version"]),
                list(values.values()),
            )

    def job_io(self, batch: Sequence[EventRows], job_ids: dict[tuple[str, str], int], dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int]) -> None:
        values: dict[tuple[int, int, str], dict[str, Any]] = {}
        for rows in batch:
            if not rows.job:
                continue
            job_id = job_ids[(rows.job.namespace, rows.job.name)]
            run_id = run_ids.get(rows.run.uuid) if rows.run else None
            for dataset in rows.datasets:
                key = (job_id, dataset_ids[(dataset.namespace, dataset.name)], dataset.direction or "input")
                _span(values, key, rows.event_time, run_id,
                      {"job_id": key[0], "dataset_id": key[1], "direction": key[2]})
        self._upsert_spans(job_io, ["job_id", "dataset_id", "direction"], list(values.values()))

    def _upsert_spans(self, table: Table, key_names: list[str], values: list[dict[str, Any]], *, index_where: Any = None, newest_columns: Iterable[str] = ()) -> None:
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
        self.connection.execute(statement, values)

    def column_lineage(self, batch: Sequence[EventRows], job_ids: dict[tuple[str, str], int], dataset_ids: dict[DatasetKey, int], field_ids: dict[tuple[int, str], int], run_ids: dict[str, int]) -> None:
        per_field: dict[tuple[Any, ...], dict[str, Any]] = {}
        per_dataset: dict[tuple[Any, ...], dict[str, Any]] = {}
        for rows in batch:
            if not rows.job:
                continue
            job_id = job_ids[(rows.job.namespace, rows.job.name)]
            run_id = run_ids.get(rows.run.uuid) if rows.run else None
            for edge in rows.column_edges:
                output_id = dataset_ids[edge.output]
                input_id = dataset_ids[edge.input]
                input_field_id = field_ids[(input_id, edge.input_field)]
                output_field_id = None if edge.output_field is None else field_ids[(output_id, edge.output_field)]
                row = {
                    "output_dataset_id": output_id, "output_field_id": output_field_id,
                    "input_dataset_id": input_id, "input_field_id": input_field_id,
                    "transformation_type": edge.type, "transformation_subtype": edge.subtype,
                    "transformation_description": edge.description, "masking": edge.masking, "job_id": job_id,
                }
                if output_field_id is None:
                    _span(per_dataset, (output_id, input_field_id, edge.type, edge.subtype), rows.event_time, run_id, row)
                else:
                    _span(per_field, (output_field_id, input_field_id, edge.type, edge.subtype), rows.event_time, run_id, row)
        newest = ("transformation_description", "masking", "job_id")
        self._upsert_spans(
            column_lineage, ["output_field_id", "input_field_id", "transformation_type", "transformation_subtype"],
            list(per_field.values()), index_where=column_lineage.c.output_field_id.isnot(None), newest_columns=newest,
        )
        self._upsert_spans(
            column_lineage, ["output_dataset_id", "input_field_id", "transformation_type", "transformation_subtype"],
            list(per_dataset.values()), index_where=column_lineage.c.output_field_id.is_(None), newest_columns=newest,
        )

    def snapshots(self, batch: Sequence[EventRows], job_ids: dict[tuple[str, str], int], dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int], run_seqs: dict[str, int]) -> None:
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
                    "run_id": run_id, "job_id": job_ids[(rows.job.namespace, rows.job.name)],
                    "barrier_id": barrier_id, "dataset_id": key[2], "direction": snapshot.direction,
                    "snapshot_id": snapshot.snapshot_id, "kind": snapshot.kind, "partitions": snapshot.partitions,
                    "start_offset": snapshot.start_offset, "end_offset": snapshot.end_offset,
                    "created_at": rows.event_time,
                }
        if not values:
            return
        statement = self.insert(snapshot_lineage)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["run_id", "barrier_id", "dataset_id", "direction"],
            set_={name: excluded[name] for name in ("snapshot_id", "kind", "partitions", "start_offset", "end_offset", "created_at")},
            where=excluded.created_at >= snapshot_lineage.c.created_at,
        )
        self.connection.execute(statement, list(values.values()))

    def latest_runs(self, job_id_set: set[int]) -> None:
        if not job_id_set:
            return
        newest_run = (
            select(runs.c.id).where(runs.c.job_id == jobs.c.id)
            .order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(1).scalar_subquery()
        )
        self.connection.execute(update(jobs).where(jobs.c.id.in_(sorted(job_id_set))).values(latest_run_id=newest_run))


def _field_changed(current: Mapping[str, Any] | None, row: Mapping[str, Any]) -> bool:
    if current is None:
        return True
    same = all(current[name] == row[name] for name in ("type", "description", "tags")) and bool(current["from_schema"])
    return not same and row["updated_at"] >= utc(current["updated_at"])


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
        "content_hash": raw.content_hash, "event_time": raw.event_time, "kind": raw.kind,
        "event_type": raw.event_type, "run_uuid": raw.run_uuid, "job_namespace": raw.job_namespace,
        "job_name": raw.job_name, "payload": raw.payload,
    }
