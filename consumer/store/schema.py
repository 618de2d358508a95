"""The consumer's one database schema (SQLAlchemy Core), shared by the write side (ingest)
and the read side (query/api). SQLite and PostgreSQL both run it unchanged.

Integer surrogate keys everywhere so recursive lineage reads join on small ints; every edge
table has a unique constraint on its natural key so every write is an idempotent upsert and
an index on each endpoint so upstream and downstream walks are both index lookups.
Times are timezone-aware UTC. JSON columns hold facets exactly as received (the per-run ones
compressed: CompressedJson).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    and_,
    func,
    or_,
    select,
    text,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import ReturnTypeFromArgs

from consumer import json_codec
from consumer.store.compressed_text import compress_facets, decompress_facets
from consumer.store.rows import TERMINAL_STATES

# Integer primary keys: BIGINT on PostgreSQL, INTEGER on SQLite (only INTEGER aliases the rowid).
Id = BigInteger().with_variant(Integer(), "sqlite")
# None is SQL NULL, not the JSON text 'null': nothing to decode when reading an empty column
Json = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class CompressedJson(TypeDecorator[Any]):
    """JSON kept as a zstd frame of its text made with a built-in dictionary of facet URLs and keys
    (consumer.store.compressed_text.compress_facets), for the columns every run adds a row to: the
    facets of a run and of a dataset version repeat their producer's URLs, schema URLs and names
    run after run, and compressed take a fifth of their text (both databases store a value this
    small inline and uncompressed). Python sees the decoded value; no SQL reads inside it. None is
    SQL NULL."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        return None if value is None else compress_facets(json_codec.dumps(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, (bytes, memoryview)):
            return json_codec.loads(decompress_facets(bytes(value)))
        return value


class UtcDateTime(TypeDecorator[datetime]):
    """A point in time, always an aware UTC datetime in Python on both databases. SQLite keeps
    no zone: values are stored as UTC text (so they compare in time order) and come back naive,
    which here means UTC. A naive value written is taken as UTC too."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if not isinstance(value, datetime):
            return value
        value = _as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else _as_utc(value)


CHUNK = 500  # ids per IN list, rows per statement of a batch: bounded statements on both databases
Item = TypeVar("Item")


def chunks(items: Sequence[Item], size: int = CHUNK) -> Iterator[Sequence[Item]]:
    """`items` in consecutive slices of at most `size`."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


Time = UtcDateTime()

metadata = MetaData()


def _id() -> Column:
    return Column("id", Id, primary_key=True, autoincrement=True)


namespaces = Table(
    "namespaces",
    metadata,
    _id(),
    Column("name", String(1024), nullable=False, unique=True),
    Column("owner_name", String(256)),
    Column("description", Text),
    Column("created_at", Time, nullable=False),
    Column("updated_at", Time, nullable=False),
)

tags = Table(
    "tags",
    metadata,
    _id(),
    Column("name", String(256), nullable=False, unique=True),
    Column("description", Text),
    Column("created_at", Time, nullable=False),
    Column("updated_at", Time, nullable=False),
)

jobs = Table(
    "jobs",
    metadata,
    _id(),
    Column("namespace_id", Id, ForeignKey("namespaces.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(1024), nullable=False),
    # jobType facet: BATCH / STREAMING (Marquez's job "type"), integration and jobType.
    Column("type", String(32), nullable=False, server_default="BATCH"),
    Column("integration", String(64)),
    Column("job_type", String(64)),
    Column("description", Text),
    Column("location", Text),
    Column("facets", Json, nullable=False),
    # Hash of the job's sorted inputs and outputs (never the run id): Marquez's job version.
    Column("current_version", String(64)),
    # The lineage version the walks answer on (job_versions): its latest finished run's, else its
    # latest run's, else what its newest JobEvent declared (declared_version_id, at declared_at).
    Column("current_version_id", Id, ForeignKey("job_versions.id", use_alter=True, name="fk_jobs_current_version")),
    Column("declared_version_id", Id, ForeignKey("job_versions.id", use_alter=True, name="fk_jobs_declared_version")),
    Column("declared_at", Time),
    # Event time each merged value and facet key came from: merging stays order-independent.
    Column("merged_at", Json),
    Column("parent_job_id", Id, ForeignKey("jobs.id", ondelete="SET NULL")),
    Column("created_at", Time, nullable=False),
    Column("updated_at", Time, nullable=False),
    # Latest event time seen for this job: drives auto-retirement of its table lineage.
    Column("last_seen", Time, nullable=False),
    # Set when the sweep retired the job's table lineage; cleared when the job is seen again.
    Column("lineage_retired_at", Time),
    # rows.state_hash of the values and facets as last written. A batch whose every event of the
    # job belongs to a run that asserted exactly this state leaves the row as it is: such runs
    # (runs.job_state = state_hash) carry the times the row would have taken (job_seen_at).
    Column("state_hash", BigInteger),
    UniqueConstraint("namespace_id", "name", name="uq_jobs_namespace_name"),
)

datasets = Table(
    "datasets",
    metadata,
    _id(),
    Column("namespace_id", Id, ForeignKey("namespaces.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(2048), nullable=False),
    # DB_TABLE or STREAM (Marquez's dataset types).
    Column("type", String(32), nullable=False, server_default="DB_TABLE"),
    Column("source_name", String(1024)),
    Column("source_uri", Text),
    Column("description", Text),
    # Paimon-style coordinates: the symlinks facet's TABLE identifier split on its last '.',
    # else (namespace, name).
    Column("database_name", String(1024), nullable=False),
    Column("table_name", String(2048), nullable=False),
    Column("facets", Json, nullable=False),
    Column("current_version", String(128)),
    Column("merged_at", Json),
    Column("created_at", Time, nullable=False),
    Column("updated_at", Time, nullable=False),
    Column("is_deleted", Boolean, nullable=False, server_default=text("false")),
    UniqueConstraint("namespace_id", "name", name="uq_datasets_namespace_name"),
    Index("ix_datasets_database_table", "database_name", "table_name"),
)

dataset_fields = Table(
    "dataset_fields",
    metadata,
    _id(),
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(1024), nullable=False),
    Column("type", String(1024)),
    Column("description", Text),
    Column("tags", Json),
    # False when the field only came from a column-lineage edge (no schema was sent).
    Column("from_schema", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", Time, nullable=False),
    UniqueConstraint("dataset_id", "name", name="uq_dataset_fields_dataset_name"),
)

# What dataset versions say about their dataset, stored once per distinct content: the fields and
# every facet but the per-version ones (consumer.store.rows.PER_VERSION_FACETS), under a hash of
# them (never of a run, time or snapshot). A scheduled job's runs make new versions of its outputs
# that all point to one content row.
dataset_version_contents = Table(
    "dataset_version_contents",
    metadata,
    _id(),
    Column("content_hash", String(64), nullable=False, unique=True),
    Column("fields", Json),
    Column("facets", Json, nullable=False),
)

dataset_versions = Table(
    "dataset_versions",
    metadata,
    _id(),
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    # The `version` facet's datasetVersion, else a hash of the dataset's schema fields.
    Column("version", String(128), nullable=False),
    Column("run_id", Id, ForeignKey("runs.id", ondelete="SET NULL")),
    Column("content_id", Id, ForeignKey("dataset_version_contents.id"), nullable=False),
    # The per-version facets (the version's content holds the others).
    Column("facets", CompressedJson(), nullable=False),
    Column("created_at", Time, nullable=False),
    UniqueConstraint("dataset_id", "version", name="uq_dataset_versions_dataset_version"),
    Index("ix_dataset_versions_run", "run_id"),  # a run's input/output versions (the runs API)
    Index("ix_dataset_versions_content", "content_id"),  # retention's deletes of contents check this key
    # A dataset's versions newest first (its versions page, its latest and last-modified version):
    # read from the top, whatever the number of runs that wrote it.
    Index("ix_dataset_versions_dataset_created", "dataset_id", "created_at", "id"),
)

dataset_tags = Table(
    "dataset_tags",
    metadata,
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("tag_id", Id, ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True),
    Column("tagged_at", Time, nullable=False),
)

job_tags = Table(
    "job_tags",
    metadata,
    Column("job_id", Id, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("tag_id", Id, ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True),
    Column("tagged_at", Time, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    _id(),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("job_id", Id, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    # Per-job sequence number (1, 2, ...) in arrival order: the batch runs' barrier_id.
    Column("run_seq", Integer, nullable=False),
    # NEW / RUNNING / COMPLETED / FAILED / ABORTED (Marquez's run states); terminal states win.
    Column("state", String(16), nullable=False),
    Column("job_version", String(64)),
    # The lineage version this run ran: the union of what its events read, wrote and derived.
    Column("job_version_id", Id, ForeignKey("job_versions.id")),
    Column("nominal_start_time", Time),
    Column("nominal_end_time", Time),
    Column("started_at", Time),
    Column("ended_at", Time),
    Column("facets", CompressedJson(), nullable=False),
    Column("parent_run_uuid", String(36)),
    Column("parent_job_namespace", String(1024)),
    Column("parent_job_name", String(1024)),
    Column("merged_at", Json),
    Column("created_at", Time, nullable=False),
    Column("updated_at", Time, nullable=False),
    # rows.RunFold.job_state: the job state all the run's events asserted (None: not all the same).
    Column("job_state", BigInteger),
    Index("ix_runs_job_created", "job_id", "created_at"),
    Index("ix_runs_job_state", "job_id", "job_state", "updated_at"),
    Index("ix_runs_parent", "parent_run_uuid"),
    Index("ix_runs_job_version", "job_version_id", "created_at"),
    UniqueConstraint("job_id", "run_seq", name="uq_runs_job_seq"),
)


def latest_run(job_id: Any, column: str = "id", *, versioned: bool = False, finished: bool = False) -> Any:
    """`column` of the job's run started last (first event time, ties by run id), as a scalar
    subquery over `ix_runs_job_created`; among its runs that ran a job version (`versioned`) and
    reached a terminal state (`finished`). Stored nowhere, so a new run rewrites no job row to say
    so. It reads an alias of `runs` of its own, so a query that joins `runs` (or asks for several
    latest runs) can use it."""
    latest = runs.alias()
    conditions = [latest.c.job_id == job_id]
    if versioned:
        conditions.append(latest.c.job_version_id.is_not(None))
    if finished:
        conditions.append(latest.c.state.in_(sorted(TERMINAL_STATES)))
    return (
        select(latest.c[column])
        .where(*conditions)
        .order_by(latest.c.created_at.desc(), latest.c.uuid.desc())
        .limit(1)
        .correlate_except(latest)
        .scalar_subquery()
    )


def confirmed_until(job_id: Any, state: Any) -> Any:
    """The latest time a run of the job asserted `state` (runs.job_state), as a scalar subquery
    over `ix_runs_job_state`; NULL when none did."""
    confirming = runs.alias()
    return (
        select(func.max(confirming.c.updated_at))
        .where(confirming.c.job_id == job_id, confirming.c.job_state == state)
        .correlate_except(confirming)
        .scalar_subquery()
    )


def job_seen_at(stored: Any) -> Any:
    """A job's `updated_at` or `last_seen` (the `stored` column) as answered: the stored time, or
    the latest time of a run that asserted the job's stored state, if later (such a run's batch
    may have left the job's row as it was, jobs.state_hash)."""
    return type_coerce(_greatest(stored, func.coalesce(confirmed_until(jobs.c.id, jobs.c.state_hash), stored)), Time)


class _greatest(ReturnTypeFromArgs[Any]):  # noqa: N801 - an SQL function's name
    """The largest of its arguments: GREATEST on PostgreSQL, the many-argument max() on SQLite."""

    name = "greatest"
    inherit_cache = True


@compiles(_greatest, "sqlite")
def _greatest_on_sqlite(element: _greatest, compiler: SQLCompiler, **kw: Any) -> str:
    return f"max({compiler.process(element.clauses, **kw)})"


# What a job does, stored once per distinct content: the datasets one run of it (or one JobEvent)
# read and wrote, their schemas, and its column-lineage edges, by natural key (consumer.store.rows.lineage_content),
# under the hash of that content. Runs point to the version they ran; a scheduled job's runs all
# point to one row. created_at: the earliest run that ran it.
job_versions = Table(
    "job_versions",
    metadata,
    _id(),
    Column("job_id", Id, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("lineage_hash", String(64), nullable=False),
    Column("content", Json, nullable=False),
    Column("created_at", Time, nullable=False),
    UniqueConstraint("job_id", "lineage_hash", name="uq_job_versions_job_hash"),
)

# Table lineage now: which job reads (direction 'input') or writes ('output') which dataset in its
# current version (jobs.current_version_id), rewritten only when that version changes.
# first_seen: when the current version was first run.
job_io = Table(
    "job_io",
    metadata,
    _id(),
    Column("job_id", Id, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("direction", String(6), nullable=False),
    Column("first_seen", Time, nullable=False),
    UniqueConstraint("job_id", "dataset_id", "direction", name="uq_job_io"),
    Index("ix_job_io_dataset", "dataset_id", "direction"),
)

# Column lineage now: output field <- input field, per job, as each job's current version derives
# it (rewritten only when that version changes). Rows with a NULL output_field_id are the
# dataset-level INDIRECT inputs (JOIN, FILTER, GROUP_BY, SORT ...) of output_dataset_id.
# No foreign-key constraints: on PostgreSQL their checks (key-share locks per row written) cost
# more than the rest of the table's writes. The writer resolves every id in the transaction that
# writes the row, nothing deletes what they point to (datasets and jobs are retired, not deleted;
# replay empties every table), and `info["references"]` names the table each id points to.
column_lineage = Table(
    "column_lineage",
    metadata,
    _id(),
    Column("output_dataset_id", Id, nullable=False, info={"references": "datasets"}),
    Column("output_field_id", Id, info={"references": "dataset_fields"}),
    Column("input_dataset_id", Id, nullable=False, info={"references": "datasets"}),
    Column("input_field_id", Id, nullable=False, info={"references": "dataset_fields"}),
    Column("transformation_type", String(16), nullable=False),
    Column("transformation_subtype", String(64), nullable=False),
    Column("transformation_description", Text),
    Column("masking", Boolean, nullable=False, server_default=text("false")),
    Column("job_id", Id, nullable=False, info={"references": "jobs"}),
    Index(
        "uq_column_lineage_field",
        "job_id",
        "output_field_id",
        "input_field_id",
        "transformation_type",
        "transformation_subtype",
        unique=True,
        sqlite_where=text("output_field_id IS NOT NULL"),
        postgresql_where=text("output_field_id IS NOT NULL"),
    ),
    Index(
        "uq_column_lineage_dataset",
        "job_id",
        "output_dataset_id",
        "input_field_id",
        "transformation_type",
        "transformation_subtype",
        unique=True,
        sqlite_where=text("output_field_id IS NULL"),
        postgresql_where=text("output_field_id IS NULL"),
    ),
    Index("ix_column_lineage_output_field", "output_field_id"),
    Index("ix_column_lineage_input_field", "input_field_id"),
    Index("ix_column_lineage_output_dataset", "output_dataset_id"),
)


def column_lineage_of_jobs(job_ids: Sequence[int], dialect: str) -> Any:
    """The condition on column_lineage rows of these jobs, said so that an index finds them. job_id
    leads only the two partial unique indexes, and a condition on job_id alone implies neither
    one's predicate: both databases would scan the whole table. Each arm here implies one of them.
    For the second, SQLite without statistics would rather read every NULL of
    ix_column_lineage_output_field; unlikely() (which only tells its planner that few rows are
    dataset-level, as is true) keeps the term off that index."""
    c = column_lineage.c
    of_jobs = c.job_id.in_(job_ids)
    dataset_level: Any = c.output_field_id.is_(None)
    if dialect == "sqlite":
        dataset_level = func.unlikely(dataset_level)
    return or_(and_(of_jobs, c.output_field_id.is_not(None)), and_(of_jobs, dataset_level))


# Data lineage: the snapshot of each dataset a run (or one micro-batch of it) consumed or
# produced. barrier_id = the micro-batch id for streaming runs, runs.run_seq for batch runs.
snapshot_lineage = Table(
    "snapshot_lineage",
    metadata,
    _id(),
    Column("run_id", Id, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("job_id", Id, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("barrier_id", BigInteger, nullable=False),
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("direction", String(6), nullable=False),
    Column("snapshot_id", String(256), nullable=False),
    # content / delta / iceberg / stream-offsets / sink-batch (the snapshot facet's kind).
    Column("kind", String(32)),
    Column("partitions", Json),
    Column("start_offset", Json),
    Column("end_offset", Json),
    Column("created_at", Time, nullable=False),
    UniqueConstraint("run_id", "barrier_id", "dataset_id", "direction", name="uq_snapshot_lineage"),
    Index("ix_snapshot_lineage_dataset", "dataset_id", "snapshot_id"),
    Index("ix_snapshot_lineage_job_barrier", "job_id", "barrier_id"),
)

# Partition-level data lineage: the partitions a run (or micro-batch) read after pruning
# ('input') or wrote ('output'), one row per partition of its snapshot_lineage row (whose
# barrier id may be renumbered: the rows follow it). `partition_name` is Hive's partition name
# (`dt=2024-01-02`, `a=1/b=x`, see consumer.partitions).
partition_lineage = Table(
    "partition_lineage",
    metadata,
    _id(),
    Column("snapshot_lineage_id", Id, ForeignKey("snapshot_lineage.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_id", Id, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("direction", String(6), nullable=False),
    Column("partition_name", String(512), nullable=False),
    UniqueConstraint("snapshot_lineage_id", "partition_name", name="uq_partition_lineage"),
    Index("ix_partition_lineage_dataset", "dataset_id", "partition_name", "direction"),
)

# Raw events as received: the source of replay and of Marquez's GET /events/lineage.
lineage_events = Table(
    "lineage_events",
    metadata,
    _id(),
    # sha256 of the event text as received (canonical JSON for HTTP): the same event twice is stored once.
    Column("content_hash", String(64), nullable=False, unique=True),
    Column("event_time", Time, nullable=False),
    # RunEvent / DatasetEvent / JobEvent
    Column("kind", String(16), nullable=False),
    Column("event_type", String(16)),
    Column("run_uuid", String(36)),
    Column("job_namespace", String(1024)),
    Column("job_name", String(1024)),
    # The event's text as a zstd frame (consumer.store.compressed_text); its header names the
    # dictionary of raw_event_dictionaries it was made with, if any.
    Column("payload", LargeBinary, nullable=False),
    Column("received_at", Time, nullable=False),
    Index("ix_lineage_events_time", "event_time"),
    Index("ix_lineage_events_run", "run_uuid"),
    Index("ix_lineage_events_job", "job_namespace", "job_name"),
)

# The zstd dictionaries raw events are compressed with (consumer.store.raw_dictionaries): trained on
# the store's own events, never changed nor removed while a frame may name them. `id` is the
# dictionary id zstd wrote into the dictionary and into every frame made with it.
raw_event_dictionaries = Table(
    "raw_event_dictionaries",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", Time, nullable=False),
)

# Lineage-change messages (consumer.ingest.change_publishing), written in the store transaction that made the
# change and deleted once the changes topic acknowledged them: a crash between the commit and
# the publish loses none. Published in `id` order, so a key's messages keep their order.
change_outbox = Table(
    "change_outbox",
    metadata,
    _id(),
    Column("message_key", LargeBinary, nullable=False),
    Column("message", LargeBinary, nullable=False),
)

# The Paimon lineage-proposal views (source/sink_job_lineage, source/sink_snapshot_lineage) and
# source/sink_partition_lineage are created by the migrations
# (consumer/store/migrations/versions), as every other DDL.
