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
  run id), renumbered when an earlier run arrives late.

On PostgreSQL several writers may write at once: each transaction first takes advisory locks on
the jobs, datasets and runs of its batch in one global (sorted) order, and every upsert sends its
rows sorted by key, so row locks are taken in one order too: no deadlocks, no lost updates."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Table, and_, bindparam, case, func, select, text, type_coerce, update
from sqlalchemy.dialects import postgresql, sqlite

from consumer import json_codec
from consumer.store.bulk import execute_many, overlapped
from consumer.store.confirmed_state import confirm, confirmed_times
from consumer.store.rows import (
    CONTENTS_LOCK,
    DATASET_VALUES,
    FACET,
    JOB_VALUES,
    RUN_VALUES,
    STATE_RANK,
    TERMINAL_STATES,
    DatasetKey,
    Folded,
    JobKey,
    Merged,
    RawEvent,
    RunFold,
    current_rows,
    keeps_stored_facets,
    lineage_from_content,
    lineage_version,
    next_state,
    stamp,
)
from consumer.store.schema import (
    UtcDateTime,
    chunks,
    column_lineage,
    column_lineage_of_jobs,
    dataset_fields,
    dataset_version_contents,
    dataset_versions,
    datasets,
    job_io,
    job_versions,
    jobs,
    latest_run,
    lineage_events,
    namespaces,
    partition_lineage,
    runs,
    snapshot_lineage,
)

BATCH_WORK_MEM = "64MB"
# Below any number _number_runs uses while it renumbers (it passes through -1, -2, ...).
_PROVISIONAL_SEQ = -1_000_000_000
# A field's clock in its dataset's `merged_at` (see _BatchWriter.datasets).
FIELD = "fields."


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


def _without_facets(table: Table) -> list[Any]:
    return [column for column in table.c if column.name != "facets"]


def _top_of_other_runs(column: str, leaving_out: Sequence[str]) -> Any:
    """The largest `column` among a job's runs but `leaving_out`, correlated to `jobs`. On created_at
    and run_seq it is read from the top of ix_runs_job_created and uq_runs_job_seq, so it costs the
    same however many runs the job has (a grouped max over the job's runs read them all, every batch)."""
    others = runs.alias()
    conditions = [others.c.job_id == jobs.c.id]
    if leaving_out:
        conditions.append(others.c.uuid.not_in(leaving_out))
    return select(func.max(others.c[column])).where(*conditions).correlate_except(others).scalar_subquery()


# Every column of a column_lineage row but its id: two rows with the same values are the same edge.
_EDGE_COLUMNS = (
    "job_id",
    "output_dataset_id",
    "output_field_id",
    "input_dataset_id",
    "input_field_id",
    "transformation_type",
    "transformation_subtype",
    "transformation_description",
    "masking",
)

# The columns of a field a batch merges into, in this order (created_at the earliest).
_FIELD_VALUES = ("type", "description", "tags", "from_schema", "created_at")


class _BatchWriter:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.dialect = connection.dialect.name
        self.insert: Callable[[Table], Any] = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        self.now = datetime.now(timezone.utc)
        # The content of each job version this batch looked up or wrote, by id: the current
        # lineage written after it need not read back what was just hashed.
        self.version_content: dict[int, dict[str, Any]] = {}

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
        ascending lock-id order (the one global order all writers share), and the version
        contents' lock shared (rows.CONTENTS_LOCK). SQLite has one writer."""
        if self.dialect != "postgresql":
            return
        self.connection.execute(text("SELECT pg_advisory_xact_lock_shared(:contents)"), {"contents": CONTENTS_LOCK})
        if not lock_ids:
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
        for chunk in chunks(sorted(hashes)):
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
        dataset_ids, field_clocks = self.datasets(folded, namespace_ids)
        field_ids = self.fields(folded, dataset_ids, field_clocks)
        job_ids, retired_jobs = self.jobs(folded, namespace_ids)
        run_ids, run_seqs, run_jobs = self.runs(folded, job_ids)
        content_ids = self.version_contents(folded)
        # Nothing in this block reads back: each statement runs while the next one's rows are built.
        with overlapped(self.connection):
            if store_raw:
                self.raw_events(folded)
            self.dataset_versions(folded, dataset_ids, run_ids, content_ids)
            snapshot_keys = self.snapshots(folded, job_ids, dataset_ids, run_ids, run_seqs)
        self.partitions(folded, snapshot_keys)
        touched_jobs = set(job_ids.values()) | set(run_jobs)
        self.declared_versions(folded, job_ids)
        self.current_lineage(touched_jobs, retired_jobs, dataset_ids, field_ids)

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
        for chunk in chunks(sorted(wanted)):
            if len(key_columns) == 1:
                condition = key_columns[0].in_(chunk)
            else:
                condition = and_(*(column.in_(sorted({key[i] for key in chunk})) for i, column in enumerate(key_columns)))
            query = select(*columns) if columns is not None else select(table)
            for row in self.connection.execute(query.where(condition)).mappings():
                key = row[key_columns[0].name] if len(key_columns) == 1 else tuple(row[c.name] for c in key_columns)
                if key in wanted:
                    found[key] = dict(row)
        return found

    def _stored_for_merge(
        self,
        table: Table,
        key_columns: list[Any],
        incoming: Mapping[Any, Merged],
        found: dict[Any, dict[str, Any]] | None = None,
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows by natural key (those `found` already, if given), to merge the batch's
        `incoming` values per key into. A row's facets (large JSON: schemas, column lineage) are
        read only where one of its stored facets outlives the batch; where the batch carries a
        newer value of every one, the merge needs none of them."""
        if found is None:
            found = self._existing(table, key_columns, list(incoming), _without_facets(table))
        kept = sorted(row["id"] for key, row in found.items() if keeps_stored_facets(row["merged_at"], incoming[key]))
        facets: dict[int, Any] = {}
        for chunk in chunks(kept):
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

    def datasets(
        self, folded: Folded, namespace_ids: dict[str, int]
    ) -> tuple[dict[DatasetKey, int], dict[DatasetKey, dict[str, str]]]:
        """The batch's datasets' ids, and the field clocks each had before the batch: per field the
        time of the newest schema that carried it (`merged_at["fields.<name>"]`, a stamp), which
        decides whether the batch's schema replaces a field's type and description. The clocks
        live on the dataset row, which every event of a dataset rewrites anyway, so a repeated
        schema writes no field row."""
        existing = self._stored_for_merge(
            datasets,
            [datasets.c.namespace_id, datasets.c.name],
            {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.datasets.items()},
        )
        batch_clocks: dict[DatasetKey, dict[str, str]] = defaultdict(dict)
        for dataset, name, _, _, _, from_schema, _, updated_at in folded.fields:
            if from_schema:
                batch_clocks[dataset][f"{FIELD}{name}"] = stamp(updated_at)
        stored_clocks: dict[DatasetKey, dict[str, str]] = {}
        values = []
        for (namespace, name), fold in folded.datasets.items():
            key = (namespace_ids[namespace], name)
            current = existing.get(key)
            merged = _merged_with_stored(current, DATASET_VALUES, fold.merged)
            stored_clocks[(namespace, name)] = {
                k[len(FIELD) :]: at for k, at in ((current or {}).get("merged_at") or {}).items() if k.startswith(FIELD)
            }
            times = dict(merged.times)
            for clock, at in batch_clocks.get((namespace, name), {}).items():
                times[clock] = max(at, times.get(clock, ""))
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
                    "merged_at": times,
                    "created_at": min([fold.first_named, *([current["created_at"]] if current else [])]),
                    "updated_at": updated,
                }
            )
        ids = self._upsert(datasets, ["namespace_id", "name"], values)
        return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.datasets}, stored_clocks

    def fields(
        self, folded: Folded, dataset_ids: dict[DatasetKey, int], clocks: dict[DatasetKey, dict[str, str]]
    ) -> dict[tuple[int, str], int]:
        """The batch's fields merged into the stored ones: a schema's type/description/tags when it is
        at least as new as the field's clock, or when the stored row came from edges alone; tags
        the schema leaves out keep those set through the API; created_at the earliest. Only rows
        that change are written. The ids of every field of the batch's datasets."""
        stored = self._stored_fields(sorted({dataset_ids[field[0]] for field in folded.fields}))
        as_stored = self._as_stored_time()
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for dataset, name, type_, description, tags, from_schema, created_at, updated_at in folded.fields:
            dataset_id = dataset_ids[dataset]
            current = stored.get((dataset_id, name))
            if current is None:
                row = {"dataset_id": dataset_id, "name": name, "type": type_, "description": description}
                inserts.append({**row, "tags": tags, "from_schema": from_schema, "created_at": created_at})
                continue
            field_id, *values = current
            merged = list(values)
            if as_stored(created_at) < merged[4]:
                merged[4] = created_at
            clock = clocks.get(dataset, {}).get(name)
            if from_schema and (not merged[3] or clock is None or stamp(updated_at) >= clock):
                merged[0:2], merged[3] = (type_, description), True
                if tags is not None:
                    merged[2] = tags
            if merged != values:
                updates.append(dict(zip(("field_id", *_FIELD_VALUES), (field_id, *merged), strict=True)))
        if inserts:
            statement = self.insert(dataset_fields).on_conflict_do_nothing(index_elements=["dataset_id", "name"])
            # By dataset, each one's in the fold's order (a new dataset's field ids follow its schema).
            self.many(statement, sorted(inserts, key=lambda row: row["dataset_id"]))
        if updates:
            statement = (
                update(dataset_fields)
                .where(dataset_fields.c.id == bindparam("field_id"))
                .values({column: bindparam(column) for column in _FIELD_VALUES})
            )
            self.many(statement, sorted(updates, key=lambda row: row["field_id"]))
        ids = {key: row[0] for key, row in stored.items()}
        if inserts:
            ids.update(self._field_ids(sorted({row["dataset_id"] for row in inserts})))
        return ids

    def _stored_fields(self, dataset_id_list: list[int]) -> dict[tuple[int, str], tuple[Any, ...]]:
        """(id, *_FIELD_VALUES) of every stored field of the datasets, by (dataset id, name). The
        creation time as the driver gives it (SQLite: naive, in UTC; _as_stored_time): a batch
        reads tens of thousands of fields, and converting each one's time was a third of the read."""
        c = dataset_fields.c
        as_read = {"created_at": type_coerce(c.created_at, UtcDateTime.impl)}
        columns = (c.dataset_id, c.name, c.id, *(as_read.get(name, c[name]) for name in _FIELD_VALUES))
        found: dict[tuple[int, str], tuple[Any, ...]] = {}
        for chunk in chunks(dataset_id_list):
            for row in self.connection.execute(select(*columns).where(c.dataset_id.in_(chunk))):
                found[(row[0], row[1])] = tuple(row[2:])
        return found

    def _as_stored_time(self) -> Callable[[datetime], datetime]:
        """A batch's time in the form _stored_fields reads times in, to compare the two (a batch has
        few distinct times: each is converted once)."""
        if self.dialect == "postgresql":
            return lambda at: at
        converted: dict[datetime, datetime] = {}

        def naive_utc(at: datetime) -> datetime:
            found = converted.get(at)
            if found is None:
                found = converted[at] = at.astimezone(timezone.utc).replace(tzinfo=None)
            return found

        return naive_utc

    def _field_ids(self, dataset_id_list: list[int]) -> dict[tuple[int, str], int]:
        columns = (dataset_fields.c.dataset_id, dataset_fields.c.name, dataset_fields.c.id)
        found: dict[tuple[int, str], int] = {}
        for chunk in chunks(dataset_id_list):
            for dataset_id, name, field_id in self.connection.execute(
                select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))
            ).all():
                found[(dataset_id, name)] = field_id
        return found

    def jobs(self, folded: Folded, namespace_ids: dict[str, int]) -> tuple[dict[tuple[str, str], int], set[int]]:
        """The batch's jobs' ids, and those of the ones whose lineage had been retired (seen again
        now: their current lineage is written again). A job whose events all belong to runs that
        asserted exactly its stored state keeps its row as it is (_unchanged_jobs); before any
        other write of a job, what such runs confirmed is merged into its row (consumer.store.confirmed_state)."""
        if not folded.jobs:
            return {}, set()
        incoming = {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.jobs.items()}
        stored = self._existing(jobs, [jobs.c.namespace_id, jobs.c.name], list(incoming), _without_facets(jobs))
        unchanged = self._unchanged_jobs(folded, namespace_ids, stored)
        changing = {key: row for key, row in stored.items() if key not in unchanged}
        confirmed = confirmed_times(self.connection, [row["id"] for row in changing.values()])
        for row in changing.values():
            if row["id"] in confirmed:
                confirm(row, confirmed[row["id"]])
        existing = self._stored_for_merge(
            jobs, [jobs.c.namespace_id, jobs.c.name], {key: incoming[key] for key in changing}, changing
        )
        values = []
        for (namespace, name), fold in folded.jobs.items():
            key = (namespace_ids[namespace], name)
            if key in unchanged:
                continue
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
                    "state_hash": merged.state(),
                    "created_at": min(times),
                    "updated_at": max(times),
                    "last_seen": max(times),
                    "lineage_retired_at": None,
                }
            )
        ids = self._upsert(jobs, ["namespace_id", "name"], values)
        ids.update({key: stored[key]["id"] for key in unchanged})
        retired = {row["id"] for row in existing.values() if row["lineage_retired_at"] is not None}
        return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.jobs}, retired

    def _unchanged_jobs(
        self, folded: Folded, namespace_ids: dict[str, int], stored: Mapping[tuple[int, str], Mapping[str, Any]]
    ) -> set[tuple[int, str]]:
        """The stored jobs (by natural key) the batch leaves as they are: every event of the job
        belongs to a run that asserted exactly the stored state (EntityFold.state), and to no run
        stored before with another job or state; none is older than the job; its lineage is not
        retired. Such runs' times are what the row would have taken (schema.job_seen_at)."""
        candidates: dict[JobKey, Mapping[str, Any]] = {}
        for job, fold in folded.jobs.items():
            row = stored.get((namespace_ids[job[0]], job[1]))
            if (
                row is not None
                and fold.state is not None
                and fold.state == row["state_hash"]
                and row["lineage_retired_at"] is None
                and fold.first_named >= row["created_at"]
            ):
                candidates[job] = row
        if not candidates:
            return set()
        their_runs = sorted(uuid for uuid, run in folded.runs.items() if run.job in candidates)
        blocked = set()
        for chunk in chunks(their_runs):
            query = select(runs.c.uuid, runs.c.job_id, runs.c.job_state).where(runs.c.uuid.in_(chunk))
            for uuid, job_id, job_state in self.connection.execute(query):
                row = candidates[folded.runs[uuid].job]
                if (job_id, job_state) != (row["id"], row["state_hash"]):
                    blocked.add(folded.runs[uuid].job)
        return {(namespace_ids[job[0]], job[1]) for job in candidates if job not in blocked}

    def runs(self, folded: Folded, job_ids: dict[tuple[str, str], int]) -> tuple[dict[str, int], dict[str, int], set[int]]:
        """Upsert the batch's runs, each pointing to the job version it ran; their ids, numbers, and
        the ids of their jobs."""
        if not folded.runs:
            return {}, {}, set()
        existing = self._stored_for_merge(runs, [runs.c.uuid], {uuid: fold.merged for uuid, fold in folded.runs.items()})
        run_job_ids = {
            uuid: existing[uuid]["job_id"] if uuid in existing else job_ids[fold.job] for uuid, fold in folded.runs.items()
        }
        stored_versions = {uuid: row["job_version_id"] for uuid, row in existing.items()}
        version_ids = self._run_versions(folded, run_job_ids, stored_versions)
        values: list[dict[str, Any]] = []
        for run_uuid, fold in folded.runs.items():
            current = existing.get(run_uuid)
            # A new run takes a free, provisional number; _number_runs puts every run in its place.
            run_seq = current["run_seq"] if current else _PROVISIONAL_SEQ - len(values)
            # The job state its events asserted is kept while every event asserts the same one, of its job.
            job_state = fold.job_state if run_job_ids[run_uuid] == job_ids[fold.job] else None
            if current is not None and current["job_state"] != job_state:
                job_state = None
            values.append(
                {
                    "uuid": run_uuid,
                    "job_id": run_job_ids[run_uuid],
                    "run_seq": run_seq,
                    "job_version_id": version_ids.get(run_uuid, stored_versions.get(run_uuid)),
                    **_run_values(current, fold),
                    "job_state": job_state,
                }
            )
        placed = self._appended_numbers(values, existing)
        self._upsert(runs, ["uuid"], values)
        self._number_runs([value for value in values if value["uuid"] not in placed], existing)
        touched_versions = {v for v in (*version_ids.values(), *stored_versions.values()) if v is not None}
        self._version_times(sorted(touched_versions))
        numbered = self.connection.execute(
            select(runs.c.uuid, runs.c.id, runs.c.run_seq).where(runs.c.uuid.in_(sorted(folded.runs)))
        ).all()
        run_ids = {row.uuid: row.id for row in numbered}
        return run_ids, {row.uuid: row.run_seq for row in numbered}, set(run_job_ids.values())

    # job versions ------------------------------------------------------------------------
    def _run_versions(self, folded: Folded, run_job_ids: Mapping[str, int], stored: Mapping[str, int | None]) -> dict[str, int]:
        """The version each run of the batch with lineage ran: the union of what its stored version
        and the batch's events say (a version known already costs one keyed lookup)."""
        stored_ids = {uuid: version for uuid in folded.lineage if (version := stored.get(uuid)) is not None}
        stored_content = self._version_contents(sorted(set(stored_ids.values())))
        wanted: dict[str, tuple[int, str, dict[str, Any], datetime]] = {}
        for uuid, batch_lineage in folded.lineage.items():
            known = stored_content.get(stored_ids[uuid]) if uuid in stored_ids else None
            if known is None:
                content_hash, content = folded.lineage_versions[uuid]
            else:
                known_lineage = lineage_from_content(batch_lineage.job, known[1], batch_lineage.time)
                union = known_lineage.union(batch_lineage)
                if union.key() == known_lineage.key():
                    continue  # nothing new: the run keeps its version
                batch_lineage = union
                content_hash, content = lineage_version(union)
            wanted[uuid] = (run_job_ids[uuid], content_hash, content, batch_lineage.time)
        ids = self._version_ids(
            {(job_id, content_hash): (content, time) for job_id, content_hash, content, time in wanted.values()}
        )
        return {uuid: ids[(job_id, content_hash)] for uuid, (job_id, content_hash, _, _) in wanted.items()}

    def _version_contents(self, version_ids: Sequence[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        found: dict[int, tuple[str, dict[str, Any]]] = {}
        for chunk in chunks(version_ids):
            for row in self.connection.execute(
                select(job_versions.c.id, job_versions.c.lineage_hash, job_versions.c.content).where(job_versions.c.id.in_(chunk))
            ):
                found[row.id] = (row.lineage_hash, row.content)
        return found

    def _version_ids(self, wanted: Mapping[tuple[int, str], tuple[dict[str, Any], datetime]]) -> dict[tuple[int, str], int]:
        """The ids of job versions by (job id, hash), inserting those not stored yet."""

        def row(key: tuple[int, str]) -> dict[str, Any]:
            content, created_at = wanted[key]
            return {"job_id": key[0], "lineage_hash": key[1], "content": content, "created_at": created_at}

        ids = self._ids_inserting_missing(job_versions, ["job_id", "lineage_hash"], wanted, row)
        self.version_content.update((ids[key], content) for key, (content, _) in wanted.items())
        return ids

    def _version_times(self, version_ids: Sequence[int]) -> None:
        """A version's created_at is the earliest run that ran it (written only where that changed)."""
        if not version_ids:
            return
        earliest = select(func.min(runs.c.created_at)).where(runs.c.job_version_id == job_versions.c.id).scalar_subquery()
        for chunk in chunks(version_ids):
            self.connection.execute(
                update(job_versions)
                .where(job_versions.c.id.in_(chunk), earliest.is_not(None), job_versions.c.created_at != earliest)
                .values(created_at=earliest)
            )

    def declared_versions(self, folded: Folded, job_ids: Mapping[JobKey, int]) -> None:
        """A JobEvent's lineage becomes its job's declared version when it is the newest declaration."""
        if not folded.declared:
            return
        stored = dict(
            self.connection.execute(
                select(jobs.c.id, jobs.c.declared_at).where(jobs.c.id.in_(sorted(job_ids[job] for job in folded.declared)))
            ).all()
        )
        newer: dict[int, tuple[str, dict[str, Any], datetime]] = {}
        for job, lineage in folded.declared.items():
            job_id = job_ids[job]
            if stored.get(job_id) is None or lineage.time >= stored[job_id]:
                newer[job_id] = (*lineage_version(lineage), lineage.time)
        ids = self._version_ids({(job_id, h): (content, time) for job_id, (h, content, time) in newer.items()})
        self.many(
            update(jobs)
            .where(jobs.c.id == bindparam("job"))
            .values(declared_version_id=bindparam("version"), declared_at=bindparam("at")),
            [{"job": job_id, "version": ids[(job_id, h)], "at": time} for job_id, (h, _, time) in sorted(newer.items())],
        )

    def _appended_numbers(self, values: list[dict[str, Any]], stored: Mapping[str, Mapping[str, Any]]) -> set[str]:
        """Number the new runs that come after all of their job's stored runs (a scheduled job's
        usual case) before they are written, so they are written once: their `run_seq` set in
        `values`; the uuids numbered. Jobs with a stored run of the batch are left to _number_runs."""
        new_by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
        with_stored = {value["job_id"] for value in values if value["uuid"] in stored}
        for value in values:
            if value["uuid"] not in stored and value["job_id"] not in with_stored:
                new_by_job[value["job_id"]].append(value)
        if not new_by_job:
            return set()
        others = self._stored_runs_ends(sorted(new_by_job), ())
        placed: set[str] = set()
        for job_id, new in new_by_job.items():
            latest, count = others.get(job_id, (None, 0))
            new.sort(key=lambda value: (value["created_at"], value["uuid"]))
            if latest is None or new[0]["created_at"] > latest:
                for rank, value in enumerate(new, 1):
                    value["run_seq"] = count + rank
                    placed.add(value["uuid"])
        return placed

    def _stored_runs_ends(self, job_id_list: Sequence[int], leaving_out: Sequence[str]) -> dict[int, tuple[datetime, int]]:
        """(first event time of the latest run, highest number) of each job's stored runs but
        `leaving_out`, for the jobs that have any. The highest number is the runs' count, unless
        retention pruned the earliest."""
        latest, highest = _top_of_other_runs("created_at", leaving_out), _top_of_other_runs("run_seq", leaving_out)
        found: dict[int, tuple[datetime, int]] = {}
        for chunk in chunks(job_id_list):
            query = select(jobs.c.id, latest, highest).where(jobs.c.id.in_(chunk))
            for job_id, latest, highest in self.connection.execute(query):
                if latest is not None:
                    found[job_id] = (latest, highest)
        return found

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
        others = self._stored_runs_ends(sorted(moved_by_job), moved_uuids)
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
        # The runs before keep their numbers 1..placed: `placed` is their count, or where retention
        # pruned runs, the highest number among them (or just below the first number after them).
        placed = self.connection.execute(select(func.max(runs.c.run_seq)).where(runs.c.job_id == job_id, before)).scalar_one()
        later = self.connection.execute(
            select(runs.c.id, runs.c.run_seq).where(runs.c.job_id == job_id, ~before).order_by(runs.c.created_at, runs.c.uuid)
        ).all()
        if placed is None:
            placed = min((row.run_seq for row in later if row.run_seq > 0), default=1) - 1
        return [(row.id, row.run_seq, placed + rank) for rank, row in enumerate(later, 1) if row.run_seq != placed + rank]

    def version_contents(self, folded: Folded) -> dict[str, int]:
        """The ids of the batch's version contents by hash, inserting those not stored yet."""
        wanted = {content_hash: (fields, facets) for _, _, _, content_hash, fields, facets, _, _ in folded.versions}

        def row(content_hash: str) -> dict[str, Any]:
            fields, facets = wanted[content_hash]
            return {
                "content_hash": content_hash,
                "fields": None if fields is None else json_codec.Fragment(fields),
                "facets": json_codec.object_of(facets),
            }

        return self._ids_inserting_missing(dataset_version_contents, ["content_hash"], wanted, row)

    def _ids_inserting_missing(
        self, table: Table, key_names: list[str], keys: Iterable[Any], row_of: Callable[[Any], dict[str, Any]]
    ) -> dict[Any, int]:
        """Ids of content-addressed rows by natural key, inserting (as `row_of(key)`) only those not
        stored yet: a known row costs one keyed lookup and is never written again."""
        key_columns = [table.c[name] for name in key_names]
        wanted = set(keys)
        ids = self._select_ids(table, key_columns, sorted(wanted))
        missing = sorted(wanted - set(ids))
        if missing:
            statement = self.insert(table).on_conflict_do_nothing(index_elements=key_names)
            self.many(statement, [row_of(key) for key in missing])
            ids.update(self._select_ids(table, key_columns, missing))
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

    # current lineage ----------------------------------------------------------------------
    def current_lineage(
        self,
        job_id_set: set[int],
        retired: set[int],
        dataset_ids: Mapping[DatasetKey, int],
        field_ids: Mapping[tuple[int, str], int],
    ) -> None:
        """Each touched job's current version: the one its latest finished run ran, else its latest
        run's, else its newest JobEvent's. Where that changed (or the job's lineage had been retired),
        its rows of job_io and column_lineage follow the version's content; where the job_io rows stay
        (the same tables, or only the version's first run moved), their first_seen follows. A repeated
        run writes neither."""
        if not job_id_set:
            return
        changed: dict[int, int | None] = {}
        for job_id, stored, chosen in self._current_versions(sorted(job_id_set)):
            if stored != chosen or job_id in retired:
                changed[job_id] = chosen
        io_kept: set[int] = set()
        if changed:
            self.many(
                update(jobs).where(jobs.c.id == bindparam("job")).values(current_version_id=bindparam("version")),
                [{"job": job_id, "version": version} for job_id, version in sorted(changed.items())],
            )
            io_kept = self._write_current(changed, dataset_ids, field_ids)
        io_kept |= job_id_set - set(changed)
        since = (
            select(job_versions.c.created_at)
            .join(jobs, jobs.c.current_version_id == job_versions.c.id)
            .where(jobs.c.id == job_io.c.job_id)
            .scalar_subquery()
        )
        for chunk in chunks(sorted(io_kept)):
            self.connection.execute(
                update(job_io).where(job_io.c.job_id.in_(chunk), job_io.c.first_seen != since).values(first_seen=since)
            )

    def _current_versions(self, job_id_list: list[int]) -> list[tuple[int, int | None, int | None]]:
        """(job id, its stored current version, the one it should be) of each job."""
        finished, latest = (
            latest_run(jobs.c.id, "job_version_id", versioned=True, finished=True),
            latest_run(jobs.c.id, "job_version_id", versioned=True),
        )
        found = []
        for chunk in chunks(job_id_list):
            for row in self.connection.execute(
                select(jobs.c.id, jobs.c.current_version_id, finished, latest, jobs.c.declared_version_id).where(
                    jobs.c.id.in_(chunk)
                )
            ):
                found.append((row[0], row[1], row[2] if row[2] is not None else row[3] if row[3] is not None else row[4]))
        return found

    def _write_current(
        self, versions: Mapping[int, int | None], dataset_ids: Mapping[DatasetKey, int], field_ids: Mapping[tuple[int, str], int]
    ) -> set[int]:
        """Make the jobs' rows of job_io and column_lineage their versions' content; the jobs whose
        job_io rows were kept as they were (their first_seen is the caller's to move)."""
        stored = self._version_rows(sorted({v for v in versions.values() if v is not None}))
        contents = {job_id: stored[version] for job_id, version in versions.items() if version is not None}
        named: set[DatasetKey] = {
            (key[0], key[1]) for content, _ in contents.values() for key in (*content["inputs"], *content["outputs"])
        }
        named |= {(e[i], e[i + 1]) for content, _ in contents.values() for e in content["edges"] for i in (0, 3)}
        ids = dict(dataset_ids)
        ids.update(self._dataset_ids(sorted(named - set(ids))))
        fields = dict(field_ids)
        with_fields = {dataset_id for dataset_id, _ in fields}
        edge_datasets = {ids[(e[i], e[i + 1])] for content, _ in contents.values() for e in content["edges"] for i in (0, 3)}
        fields.update(self._field_ids(sorted(edge_datasets - with_fields)))
        io_rows, edge_rows = current_rows({job_id: content for job_id, (content, _) in contents.items()}, ids, fields)
        for row in io_rows:
            row["first_seen"] = contents[row["job_id"]][1]
        stored_io = self._stored_io(sorted(versions))
        new_io: dict[int, set[tuple[int, str]]] = defaultdict(set)
        for row in io_rows:
            new_io[row["job_id"]].add((row["dataset_id"], row["direction"]))
        # Where a job reads and writes the same tables as before, its new version mostly keeps the
        # old one's edges (a column added, one edge moved): only the edges that differ are written.
        # Elsewhere (other tables: few edges in common) all of its rows are replaced.
        edited = {job_id for job_id, io in stored_io.items() if new_io.get(job_id) == io}
        replaced = sorted(set(versions) - edited)
        for chunk in chunks(replaced):
            self.connection.execute(job_io.delete().where(job_io.c.job_id.in_(chunk)))
            self.connection.execute(column_lineage.delete().where(column_lineage_of_jobs(chunk, self.dialect)))
        edge_rows = self._edge_changes(sorted(edited), edge_rows)
        io_rows = [row for row in io_rows if row["job_id"] not in edited]
        if io_rows:
            self.many(self.insert(job_io), sorted(io_rows, key=lambda r: (r["job_id"], r["dataset_id"], r["direction"])))
        if edge_rows:
            self.many(self.insert(column_lineage), edge_rows)
        return edited

    def _stored_io(self, job_id_list: Sequence[int]) -> dict[int, set[tuple[int, str]]]:
        """The (dataset id, direction) pairs of job_io by job."""
        found: dict[int, set[tuple[int, str]]] = defaultdict(set)
        c = job_io.c
        for chunk in chunks(job_id_list):
            for job_id, dataset_id, direction in self.connection.execute(
                select(c.job_id, c.dataset_id, c.direction).where(c.job_id.in_(chunk))
            ):
                found[job_id].add((dataset_id, direction))
        return found

    def _edge_changes(self, job_id_list: Sequence[int], edge_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delete the stored column_lineage rows of these jobs that `edge_rows` (their rows now, with
        every other job's) no longer hold; the rows of `edge_rows` still to insert."""
        if not job_id_list:
            return edge_rows
        wanted = {tuple(row[name] for name in _EDGE_COLUMNS): row for row in edge_rows}
        c = column_lineage.c
        stale: list[int] = []
        for chunk in chunks(job_id_list):
            for edge_id, *values in self.connection.execute(
                select(c.id, *(c[name] for name in _EDGE_COLUMNS)).where(column_lineage_of_jobs(chunk, self.dialect))
            ):
                if wanted.pop(tuple(values), None) is None:
                    stale.append(edge_id)
        for chunk in chunks(sorted(stale)):
            self.connection.execute(column_lineage.delete().where(c.id.in_(chunk)))
        return list(wanted.values())  # in edge_rows' order

    def _version_rows(self, version_ids: Sequence[int]) -> dict[int, tuple[dict[str, Any], datetime]]:
        """(content, created_at) of job versions by id; the content read only where this batch did not know it."""
        c = job_versions.c
        found: dict[int, tuple[dict[str, Any], datetime]] = {}
        for chunk in chunks(version_ids):
            known = [version for version in chunk if version in self.version_content]
            if known:
                for version, created_at in self.connection.execute(select(c.id, c.created_at).where(c.id.in_(known))):
                    found[version] = (self.version_content[version], created_at)
            unknown = [version for version in chunk if version not in self.version_content]
            if unknown:
                for version, content, created_at in self.connection.execute(
                    select(c.id, c.content, c.created_at).where(c.id.in_(unknown))
                ):
                    found[version] = (content, created_at)
        return found

    def _dataset_ids(self, keys: Sequence[DatasetKey]) -> dict[DatasetKey, int]:
        """Ids of stored datasets by (namespace, name)."""
        found: dict[DatasetKey, int] = {}
        wanted = set(keys)
        for chunk in chunks(sorted({name for _, name in wanted})):
            for row in self.connection.execute(
                select(datasets.c.id, namespaces.c.name.label("namespace"), datasets.c.name)
                .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
                .where(datasets.c.name.in_(chunk))
            ):
                if (row.namespace, row.name) in wanted:
                    found[(row.namespace, row.name)] = row.id
        return found


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
