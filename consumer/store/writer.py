"""The write side of the store: one folded batch (consumer.store.rows: its rows by natural key) ->
a fixed, small number of set-based statements per table (one upsert for all its rows, see
store/bulk.py, and one keyed select for the row ids), all in the caller's transaction.

What the fold computed from the batch alone is merged here with what the store holds, under the
same rules (consumer.store.rows), so every derived row is a function of the SET of events stored,
never of their order, batching or arrival time: any permutation of the same events, split into
any batches by any number of writers, builds the same store. Besides those rules:
- a dataset's `updated_at` is its latest own event; only a dataset known from column-lineage
  edges alone takes the edges' times;
- a job's runs are numbered 1, 2, ... (`run_seq`) in the order of their first event time (ties by
  run id), renumbered when an earlier run arrives late; `latest_run_id` is the run started last.

On PostgreSQL several writers may write at once: each transaction first takes advisory locks on
the jobs, datasets and runs of its batch in one global (sorted) order, and every upsert sends its
rows sorted by key, so row locks are taken in one order too: no deadlocks, no lost updates."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Table, and_, bindparam, case, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from consumer import json_codec
from consumer.store.bulk import execute_many, overlapped
from consumer.store.rows import (
    DATASET_VALUES,
    FACET,
    JOB_VALUES,
    RUN_VALUES,
    STATE_RANK,
    TERMINAL_STATES,
    DatasetKey,
    Folded,
    Merged,
    RawEvent,
    RunFold,
    keeps_stored_facets,
    next_state,
    stamp,
)
from consumer.store.schema import (
    column_lineage,
    dataset_fields,
    dataset_version_contents,
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
# Below any number _number_runs uses while it renumbers (it passes through -1, -2, ...).
_PROVISIONAL_SEQ = -1_000_000_000


def write_batch(
    connection: Connection, folded: Folded, refold: Callable[[Set[str]], Folded] | None = None, *, store_raw: bool = True
) -> int:
    """Upsert `folded` (raw events too unless `store_raw` is False, as in replay); the number of
    events that were new. Events already stored are skipped whole: when some of the batch's are,
    `refold(hashes of the others)` gives the batch without them."""
    writer = _BatchWriter(connection)
    writer.size_memory()
    writer.lock_keys(folded.lock_ids)
    if store_raw:
        fresh = writer.not_stored(folded.hashes)
        if not fresh:
            return 0
        if len(fresh) < len(folded.hashes):
            if refold is None:
                raise ValueError("some events of the batch are stored already: a refold is needed")
            folded = refold(fresh)
    writer.derived(folded, store_raw=store_raw)
    return folded.events


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _merged_with_stored(row: Mapping[str, Any] | None, columns: Sequence[str], batch: Merged) -> Merged:
    """A stored row's merged values and facets (its facets only if they were read), with the
    batch's merged in after them."""
    if row is None:
        return batch
    values = {column: row[column] for column in columns}
    facets = json_codec.encode_members(row["facets"] or {})
    times = row.get("merged_at")
    if times is None:  # written before merged_at existed: everything as of its last update
        at = stamp(row["updated_at"])
        times = {key: at for key, value in values.items() if value is not None}
        times.update({f"{FACET}{key}": at for key in facets})
    merged = Merged(values, facets, times)
    merged.absorb(batch)
    return merged


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
    def lock_keys(self, lock_ids: Sequence[int]) -> None:
        """PostgreSQL: transaction advisory locks on every job, dataset and run of the batch, in
        ascending lock-id order (the one global order all writers share). SQLite has one writer."""
        if self.dialect != "postgresql" or not lock_ids:
            return
        self.connection.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(id)) FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id ORDER BY 1) AS ordered"
            ),
            {"ids": sorted(lock_ids)},
        )

    # raw events -------------------------------------------------------------------------
    def not_stored(self, hashes: Sequence[str]) -> set[str]:
        """The hashes of the batch's events whose raw event is not stored yet."""
        stored: set[str] = set()
        for chunk in _chunks(sorted(hashes)):
            stored.update(
                self.connection.execute(
                    select(lineage_events.c.content_hash).where(lineage_events.c.content_hash.in_(chunk))
                ).scalars()
            )
        return set(hashes) - stored

    def raw_events(self, folded: Folded) -> None:
        self.many(
            self.insert(lineage_events).on_conflict_do_nothing(index_elements=["content_hash"]),
            [dict(zip(RawEvent._fields, raw, strict=True), received_at=self.now) for raw in folded.raw],
        )

    # derived stores ---------------------------------------------------------------------
    def derived(self, folded: Folded, *, store_raw: bool) -> None:
        namespace_ids = self.namespaces(folded)
        dataset_ids = self.datasets(folded, namespace_ids)
        field_ids = self.fields(folded, dataset_ids)
        job_ids = self.jobs(folded, namespace_ids)
        run_ids, run_seqs = self.runs(folded, job_ids)
        content_ids = self.version_contents(folded)
        # Nothing in this block reads back: each statement runs while the next one's rows are built.
        with overlapped(self.connection):
            if store_raw:
                self.raw_events(folded)
            self.run_states(folded, run_ids)
            self.dataset_versions(folded, dataset_ids, run_ids, content_ids)
            self.job_io(folded, job_ids, dataset_ids, run_ids)
            self.column_lineage(folded, job_ids, dataset_ids, field_ids, run_ids)
            snapshot_keys = self.snapshots(folded, job_ids, dataset_ids, run_ids, run_seqs)
        self.partitions(folded, snapshot_keys)
        self.latest_runs(set(job_ids.values()))

    def _earliest_latest(self, table: Table, first: str, last: str) -> dict[str, Any]:
        statement = self.insert(table)
        excluded = statement.excluded
        return {
            first: case((excluded[first] < table.c[first], excluded[first]), else_=table.c[first]),
            last: case((excluded[last] > table.c[last], excluded[last]), else_=table.c[last]),
        }

    def namespaces(self, folded: Folded) -> dict[str, int]:
        spans = folded.namespaces
        statement = self.insert(namespaces)
        statement = statement.on_conflict_do_update(
            index_elements=["name"], set_=self._earliest_latest(namespaces, "created_at", "updated_at")
        )
        self.many(
            statement, [{"name": name, "created_at": spans[name][0], "updated_at": spans[name][1]} for name in sorted(spans)]
        )
        return self._select_ids(namespaces, [namespaces.c.name], sorted(spans))

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
        self, table: Table, key_columns: list[Any], incoming: Mapping[Any, Merged]
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows by natural key, to merge the batch's `incoming` values per key into. A row's
        facets (large JSON: schemas, column lineage) are read only where one of its stored facets
        outlives the batch; where the batch carries a newer value of every one, the merge needs
        none of them."""
        found = self._existing(table, key_columns, list(incoming), [column for column in table.c if column.name != "facets"])
        kept = sorted(row["id"] for key, row in found.items() if keeps_stored_facets(row["merged_at"], incoming[key]))
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

    def datasets(self, folded: Folded, namespace_ids: dict[str, int]) -> dict[DatasetKey, int]:
        existing = self._stored_for_merge(
            datasets,
            [datasets.c.namespace_id, datasets.c.name],
            {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.datasets.items()},
        )
        values = []
        for (namespace, name), fold in folded.datasets.items():
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            merged = _merged_with_stored(current, DATASET_VALUES, fold.merged)
            updated = merged.newest()
            if updated is None:  # known only from column-lineage edges
                updated = max([fold.last_named, *([current["updated_at"]] if current else [])])
            row = {column: merged.values.get(column) for column in DATASET_VALUES}
            row["type"] = row["type"] or "DB_TABLE"
            row["database_name"] = row["database_name"] or namespace
            row["table_name"] = row["table_name"] or name
            values.append(
                {
                    "namespace_id": key[0],
                    "name": name,
                    "is_deleted": False,
                    **row,
                    "facets": json_codec.object_of(merged.facets),
                    "merged_at": merged.times,
                    "created_at": min([fold.first_named, *([current["created_at"]] if current else [])]),
                    "updated_at": updated,
                }
            )
        ids = self._upsert(datasets, ["namespace_id", "name"], values)
        return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.datasets}

    def fields(self, folded: Folded, dataset_ids: dict[DatasetKey, int]) -> dict[tuple[int, str], int]:
        """The batch's fields merged into the stored ones by the upsert itself: the incoming
        schema's type/description/tags when it is newer, or when the stored row came from edges
        alone; tags the schema leaves out keep those set through the API."""
        if folded.fields:
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
            rows = [
                {
                    "dataset_id": dataset_ids[dataset],
                    "name": name,
                    "type": type_,
                    "description": description,
                    "tags": tags,
                    "from_schema": from_schema,
                    "created_at": created_at,
                    "updated_at": updated_at,
                }
                for dataset, name, type_, description, tags, from_schema, created_at, updated_at in folded.fields
            ]
            # By dataset (each one's rows are guarded by its advisory lock, so their order within it is free).
            self.many(statement, sorted(rows, key=lambda row: row["dataset_id"]))
        return self._field_ids(sorted({dataset_ids[field[0]] for field in folded.fields}))

    def _field_ids(self, dataset_id_list: list[int]) -> dict[tuple[int, str], int]:
        columns = (dataset_fields.c.dataset_id, dataset_fields.c.name, dataset_fields.c.id)
        found: dict[tuple[int, str], int] = {}
        for chunk in _chunks(dataset_id_list):
            for dataset_id, name, field_id in self.connection.execute(
                select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))
            ).all():
                found[(dataset_id, name)] = field_id
        return found

    def jobs(self, folded: Folded, namespace_ids: dict[str, int]) -> dict[tuple[str, str], int]:
        if not folded.jobs:
            return {}
        existing = self._stored_for_merge(
            jobs,
            [jobs.c.namespace_id, jobs.c.name],
            {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.jobs.items()},
        )
        values = []
        for (namespace, name), fold in folded.jobs.items():
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            merged = _merged_with_stored(current, JOB_VALUES, fold.merged)
            times = [fold.first_named, fold.last_named, *([current["created_at"], current["last_seen"]] if current else [])]
            values.append(
                {
                    "namespace_id": key[0],
                    "name": name,
                    **{column: merged.values.get(column) for column in JOB_VALUES},
                    "facets": json_codec.object_of(merged.facets),
                    "merged_at": merged.times,
                    "created_at": min(times),
                    "updated_at": max(times),
                    "last_seen": max(times),
                    "lineage_retired_at": None,
                }
            )
        ids = self._upsert(jobs, ["namespace_id", "name"], values)
        return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.jobs}

    def runs(self, folded: Folded, job_ids: dict[tuple[str, str], int]) -> tuple[dict[str, int], dict[str, int]]:
        if not folded.runs:
            return {}, {}
        existing = self._stored_for_merge(runs, [runs.c.uuid], {uuid: fold.merged for uuid, fold in folded.runs.items()})
        values: list[dict[str, Any]] = []
        for run_uuid, fold in folded.runs.items():
            current = existing.get(run_uuid)
            job_id = current["job_id"] if current else job_ids[fold.job]
            # A new run takes a free, provisional number; _number_runs puts every run in its place.
            run_seq = current["run_seq"] if current else _PROVISIONAL_SEQ - len(values)
            values.append({"uuid": run_uuid, "job_id": job_id, "run_seq": run_seq, **_run_values(current, fold)})
        self._upsert(runs, ["uuid"], values)
        self._number_runs(values, existing)
        numbered = self.connection.execute(
            select(runs.c.uuid, runs.c.id, runs.c.run_seq).where(runs.c.uuid.in_(sorted(folded.runs)))
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

    def run_states(self, folded: Folded, run_ids: dict[str, int]) -> None:
        values = [
            {"run_id": run_ids[run], "event_type": event_type, "state": state, "transitioned_at": time}
            for run, event_type, state, time in folded.run_states
        ]
        if values:
            self.many(
                self.insert(run_states).on_conflict_do_nothing(index_elements=["run_id", "event_type", "transitioned_at"]),
                sorted(values, key=lambda row: (row["run_id"], row["event_type"], row["transitioned_at"])),
            )

    def version_contents(self, folded: Folded) -> dict[str, int]:
        """The ids of the batch's version contents by hash, inserting those not stored yet (only
        those: a known content costs one keyed lookup, and its row is never written again)."""
        wanted = {content_hash: (fields, facets) for _, _, _, content_hash, fields, facets, _, _ in folded.versions}
        key = [dataset_version_contents.c.content_hash]
        ids = self._select_ids(dataset_version_contents, key, sorted(wanted))
        missing = sorted(set(wanted) - set(ids))
        if missing:
            statement = self.insert(dataset_version_contents).on_conflict_do_nothing(index_elements=["content_hash"])
            rows = []
            for content_hash in missing:
                fields, facets = wanted[content_hash]
                rows.append(
                    {
                        "content_hash": content_hash,
                        "fields": None if fields is None else json_codec.Fragment(fields),
                        "facets": json_codec.object_of(facets),
                    }
                )
            self.many(statement, rows)
            ids.update(self._select_ids(dataset_version_contents, key, missing))
        return ids

    def dataset_versions(
        self, folded: Folded, dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int], content_ids: dict[str, int]
    ) -> None:
        """Each version keeps what its earliest event said (and the run of that event, for an output)."""
        values = [
            {
                "dataset_id": dataset_ids[dataset],
                "version": version,
                "run_id": None if run is None else run_ids.get(run),
                "content_id": content_ids[content_hash],
                "facets": json_codec.object_of(own_facets),
                "created_at": created_at,
            }
            for dataset, version, run, content_hash, _, _, own_facets, created_at in folded.versions
        ]
        if values:
            statement = self.insert(dataset_versions)
            excluded = statement.excluded
            statement = statement.on_conflict_do_update(
                index_elements=["dataset_id", "version"],
                set_={name: excluded[name] for name in ("run_id", "content_id", "facets", "created_at")},
                where=excluded.created_at < dataset_versions.c.created_at,
            )
            self.many(statement, sorted(values, key=lambda row: (row["dataset_id"], row["version"])))

    def job_io(
        self,
        folded: Folded,
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        run_ids: dict[str, int],
    ) -> None:
        values = [
            {
                "job_id": job_ids[job],
                "dataset_id": dataset_ids[dataset],
                "direction": direction,
                "first_seen": first_seen,
                "last_seen": last_seen,
                "last_run_id": None if last_run is None else run_ids.get(last_run),
            }
            for job, dataset, direction, first_seen, last_seen, last_run in folded.job_io
        ]
        values.sort(key=lambda row: (row["job_id"], row["dataset_id"], row["direction"]))
        self._upsert_spans(job_io, ["job_id", "dataset_id", "direction"], values)

    def _upsert_spans(
        self,
        table: Table,
        key_names: list[str],
        values: list[dict[str, Any]],
        *,
        index_where: Any = None,
        newest_columns: Sequence[str] = (),
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
        folded: Folded,
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        field_ids: dict[tuple[int, str], int],
        run_ids: dict[str, int],
    ) -> None:
        per_field: dict[tuple[Any, ...], dict[str, Any]] = {}
        per_dataset: dict[tuple[Any, ...], dict[str, Any]] = {}
        for output, out_field, source, in_field, kind, subtype, description, masking, job, first, last, run in folded.edges:
            output_id = dataset_ids[output]
            input_id = dataset_ids[source]
            input_field_id = field_ids[(input_id, in_field)]
            output_field_id = None if out_field is None else field_ids[(output_id, out_field)]
            spans = per_dataset if output_field_id is None else per_field
            key = (output_id if output_field_id is None else output_field_id, input_field_id, kind, subtype)
            spans[key] = {
                "output_dataset_id": output_id,
                "output_field_id": output_field_id,
                "input_dataset_id": input_id,
                "input_field_id": input_field_id,
                "transformation_type": kind,
                "transformation_subtype": subtype,
                "transformation_description": description,
                "masking": masking,
                "job_id": job_ids[job],
                "first_seen": first,
                "last_seen": last,
                "last_run_id": None if run is None else run_ids.get(run),
            }
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
        folded: Folded,
        job_ids: dict[tuple[str, str], int],
        dataset_ids: dict[DatasetKey, int],
        run_ids: dict[str, int],
        run_seqs: dict[str, int],
    ) -> dict[tuple[str, int | None, DatasetKey, str], tuple[int, int, int, str]]:
        """Write the batch's snapshot rows (a batch run's barrier id is its number: two of its rows
        may meet there, and the newer wins); each folded key's stored key."""
        values: dict[tuple[int, int, int, str], dict[str, Any]] = {}
        chosen: dict[tuple[int, int, int, str], tuple[datetime, int]] = {}
        stored_keys: dict[tuple[str, int | None, DatasetKey, str], tuple[int, int, int, str]] = {}
        for run, job, batch, dataset, direction, snapshot, kind, partitions, start, end, created_at, position in folded.snapshots:
            barrier_id = batch if batch is not None else run_seqs[run]
            key = (run_ids[run], barrier_id, dataset_ids[dataset], direction)
            stored_keys[(run, batch, dataset, direction)] = key
            if key in chosen and chosen[key] > (created_at, position):
                continue
            chosen[key] = (created_at, position)
            values[key] = {
                "run_id": key[0],
                "job_id": job_ids[job],
                "barrier_id": barrier_id,
                "dataset_id": key[2],
                "direction": direction,
                "snapshot_id": snapshot,
                "kind": kind,
                "partitions": partitions,
                "start_offset": start,
                "end_offset": end,
                "created_at": created_at,
            }
        if values:
            statement = self.insert(snapshot_lineage)
            excluded = statement.excluded
            statement = statement.on_conflict_do_update(
                index_elements=["run_id", "barrier_id", "dataset_id", "direction"],
                set_={
                    name: excluded[name]
                    for name in ("snapshot_id", "kind", "partitions", "start_offset", "end_offset", "created_at")
                },
                where=excluded.created_at >= snapshot_lineage.c.created_at,
            )
            self.many(statement, [values[key] for key in sorted(values)])
        return stored_keys

    def partitions(
        self, folded: Folded, snapshot_keys: Mapping[tuple[str, int | None, DatasetKey, str], tuple[int, int, int, str]]
    ) -> None:
        """The partitions each snapshot_lineage row's run read or wrote: the union over its events
        (so any order or batching of them gives the same rows), keyed to that row."""
        wanted: dict[tuple[int, int, int, str], set[str]] = defaultdict(set)
        for folded_key, names in folded.partitions.items():
            wanted[snapshot_keys[folded_key]].update(names)
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


def _run_values(current: Mapping[str, Any] | None, fold: RunFold) -> dict[str, Any]:
    """A run's columns: the batch's fold merged into the stored row as if its events had been
    applied one by one after the stored ones (consumer.ingest.fold.next_state)."""
    merged = _merged_with_stored(current, RUN_VALUES, fold.merged)
    state, started_at, ended_at = fold.state, fold.started_at, fold.ended_at
    created_at, updated_at = fold.created_at, fold.updated_at
    if current is not None:
        if state in TERMINAL_STATES:
            assert ended_at is not None  # noqa: S101 - a terminal state has an end time (narrows the type)
            state, ended_at = next_state(current["state"], current["ended_at"], state, ended_at)
        elif current["state"] in TERMINAL_STATES or STATE_RANK[current["state"]] >= STATE_RANK[state]:
            state, ended_at = current["state"], current["ended_at"]
        started_at = min(filter(None, (current["started_at"], started_at)), default=None)
        ended_at = max(filter(None, (current["ended_at"], ended_at)), default=None)
        created_at, updated_at = min(current["created_at"], created_at), max(current["updated_at"], updated_at)
    return {
        "state": state,
        "started_at": started_at,
        "ended_at": ended_at,
        **{column: merged.values.get(column) for column in RUN_VALUES},
        "facets": json_codec.object_of(merged.facets),
        "merged_at": merged.times,
        "created_at": created_at,
        "updated_at": updated_at,
    }
