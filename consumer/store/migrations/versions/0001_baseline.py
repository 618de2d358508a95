"""The store's schema as release 0.1.0 creates it: every table, index and constraint of
`consumer.store.schema`, the raw events' storage, and the Paimon lineage views.

The definitions here are frozen copies: a later change of the schema gets a revision of its own,
and this one stays as it is (tests/consumer/test_store_migrations.py checks that upgrading to the
newest revision gives exactly what `schema.metadata` declares).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The column types of `consumer.store.schema` as of this revision.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # only INTEGER aliases SQLite's rowid
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
COMPRESSED_JSON = sa.LargeBinary()  # schema.CompressedJson: a zstd frame of the JSON text
TIME = sa.DateTime(timezone=True)  # schema.UtcDateTime
FALSE = sa.text("false")

# jobs -> job_versions -> jobs is a cycle: SQLite declares the jobs' references to job_versions in
# the table (it has no ALTER TABLE ADD CONSTRAINT, and a reference may name a table to come);
# PostgreSQL adds them once job_versions exists.
JOB_VERSION_REFERENCES = (
    ("fk_jobs_current_version", "current_version_id"),
    ("fk_jobs_declared_version", "declared_version_id"),
)


def _id() -> sa.Column:
    return sa.Column("id", ID, primary_key=True, autoincrement=True)


def _fk(column: str, target: str, ondelete: str | None = "CASCADE", nullable: bool = False) -> sa.Column:
    return sa.Column(column, ID, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "namespaces",
        _id(),
        sa.Column("name", sa.String(1024), nullable=False, unique=True),
        sa.Column("owner_name", sa.String(256)),
        sa.Column("description", sa.Text()),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
    )
    op.create_table(
        "tags",
        _id(),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("description", sa.Text()),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
    )
    job_version_keys = (
        [sa.ForeignKeyConstraint([column], ["job_versions.id"], name=name) for name, column in JOB_VERSION_REFERENCES]
        if sqlite
        else []
    )
    op.create_table(
        "jobs",
        _id(),
        _fk("namespace_id", "namespaces.id"),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("type", sa.String(32), nullable=False, server_default="BATCH"),
        sa.Column("integration", sa.String(64)),
        sa.Column("job_type", sa.String(64)),
        sa.Column("description", sa.Text()),
        sa.Column("location", sa.Text()),
        sa.Column("facets", JSON, nullable=False),
        sa.Column("current_version", sa.String(64)),
        sa.Column("current_version_id", ID),
        sa.Column("declared_version_id", ID),
        sa.Column("declared_at", TIME),
        sa.Column("merged_at", JSON),
        _fk("parent_job_id", "jobs.id", "SET NULL", nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("last_seen", TIME, nullable=False),
        sa.Column("lineage_retired_at", TIME),
        sa.Column("state_hash", sa.BigInteger()),
        sa.UniqueConstraint("namespace_id", "name", name="uq_jobs_namespace_name"),
        *job_version_keys,
    )
    op.create_table(
        "job_versions",
        _id(),
        _fk("job_id", "jobs.id"),
        sa.Column("lineage_hash", sa.String(64), nullable=False),
        sa.Column("content", JSON, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("job_id", "lineage_hash", name="uq_job_versions_job_hash"),
    )
    if not sqlite:
        for name, column in JOB_VERSION_REFERENCES:
            op.create_foreign_key(name, "jobs", "job_versions", [column], ["id"])
    op.create_table(
        "datasets",
        _id(),
        _fk("namespace_id", "namespaces.id"),
        sa.Column("name", sa.String(2048), nullable=False),
        sa.Column("type", sa.String(32), nullable=False, server_default="DB_TABLE"),
        sa.Column("source_name", sa.String(1024)),
        sa.Column("source_uri", sa.Text()),
        sa.Column("description", sa.Text()),
        sa.Column("database_name", sa.String(1024), nullable=False),
        sa.Column("table_name", sa.String(2048), nullable=False),
        sa.Column("facets", JSON, nullable=False),
        sa.Column("current_version", sa.String(128)),
        sa.Column("merged_at", JSON),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("is_deleted", sa.Boolean(), nullable=False, server_default=FALSE),
        sa.UniqueConstraint("namespace_id", "name", name="uq_datasets_namespace_name"),
    )
    op.create_index("ix_datasets_database_table", "datasets", ["database_name", "table_name"])
    op.create_table(
        "dataset_fields",
        _id(),
        _fk("dataset_id", "datasets.id"),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("type", sa.String(1024)),
        sa.Column("description", sa.Text()),
        sa.Column("tags", JSON),
        sa.Column("from_schema", sa.Boolean(), nullable=False, server_default=FALSE),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("dataset_id", "name", name="uq_dataset_fields_dataset_name"),
    )
    op.create_table(
        "dataset_version_contents",
        _id(),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("fields", JSON),
        sa.Column("facets", JSON, nullable=False),
    )
    op.create_table(
        "runs",
        _id(),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        _fk("job_id", "jobs.id"),
        sa.Column("run_seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("job_version", sa.String(64)),
        _fk("job_version_id", "job_versions.id", None, nullable=True),
        sa.Column("nominal_start_time", TIME),
        sa.Column("nominal_end_time", TIME),
        sa.Column("started_at", TIME),
        sa.Column("ended_at", TIME),
        sa.Column("facets", COMPRESSED_JSON, nullable=False),
        sa.Column("parent_run_uuid", sa.String(36)),
        sa.Column("parent_job_namespace", sa.String(1024)),
        sa.Column("parent_job_name", sa.String(1024)),
        sa.Column("merged_at", JSON),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("job_state", sa.BigInteger()),
        sa.UniqueConstraint("job_id", "run_seq", name="uq_runs_job_seq"),
    )
    op.create_index("ix_runs_job_created", "runs", ["job_id", "created_at"])
    op.create_index("ix_runs_job_state", "runs", ["job_id", "job_state", "updated_at"])
    op.create_index("ix_runs_parent", "runs", ["parent_run_uuid"])
    op.create_index("ix_runs_job_version", "runs", ["job_version_id", "created_at"])
    op.create_table(
        "dataset_versions",
        _id(),
        _fk("dataset_id", "datasets.id"),
        sa.Column("version", sa.String(128), nullable=False),
        _fk("run_id", "runs.id", "SET NULL", nullable=True),
        _fk("content_id", "dataset_version_contents.id", None),
        sa.Column("facets", COMPRESSED_JSON, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("dataset_id", "version", name="uq_dataset_versions_dataset_version"),
    )
    op.create_index("ix_dataset_versions_run", "dataset_versions", ["run_id"])
    op.create_index("ix_dataset_versions_content", "dataset_versions", ["content_id"])
    op.create_index("ix_dataset_versions_dataset_created", "dataset_versions", ["dataset_id", "created_at", "id"])
    for name, owner in (("dataset_tags", "datasets"), ("job_tags", "jobs")):
        op.create_table(
            name,
            sa.Column(f"{owner[:-1]}_id", ID, sa.ForeignKey(f"{owner}.id", ondelete="CASCADE"), primary_key=True),
            sa.Column("tag_id", ID, sa.ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True),
            sa.Column("tagged_at", TIME, nullable=False),
        )
    op.create_table(
        "job_io",
        _id(),
        _fk("job_id", "jobs.id"),
        _fk("dataset_id", "datasets.id"),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("first_seen", TIME, nullable=False),
        sa.UniqueConstraint("job_id", "dataset_id", "direction", name="uq_job_io"),
    )
    op.create_index("ix_job_io_dataset", "job_io", ["dataset_id", "direction"])
    # No foreign-key constraints (schema.column_lineage says why).
    op.create_table(
        "column_lineage",
        _id(),
        sa.Column("output_dataset_id", ID, nullable=False),
        sa.Column("output_field_id", ID),
        sa.Column("input_dataset_id", ID, nullable=False),
        sa.Column("input_field_id", ID, nullable=False),
        sa.Column("transformation_type", sa.String(16), nullable=False),
        sa.Column("transformation_subtype", sa.String(64), nullable=False),
        sa.Column("transformation_description", sa.Text()),
        sa.Column("masking", sa.Boolean(), nullable=False, server_default=FALSE),
        sa.Column("job_id", ID, nullable=False),
    )
    edge = ["input_field_id", "transformation_type", "transformation_subtype"]
    for name, output, where in (
        ("uq_column_lineage_field", "output_field_id", "output_field_id IS NOT NULL"),
        ("uq_column_lineage_dataset", "output_dataset_id", "output_field_id IS NULL"),
    ):
        op.create_index(
            name,
            "column_lineage",
            ["job_id", output, *edge],
            unique=True,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )
    op.create_index("ix_column_lineage_output_field", "column_lineage", ["output_field_id"])
    op.create_index("ix_column_lineage_input_field", "column_lineage", ["input_field_id"])
    op.create_index("ix_column_lineage_output_dataset", "column_lineage", ["output_dataset_id"])
    op.create_table(
        "snapshot_lineage",
        _id(),
        _fk("run_id", "runs.id"),
        _fk("job_id", "jobs.id"),
        sa.Column("barrier_id", sa.BigInteger(), nullable=False),
        _fk("dataset_id", "datasets.id"),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("snapshot_id", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(32)),
        sa.Column("partitions", JSON),
        sa.Column("start_offset", JSON),
        sa.Column("end_offset", JSON),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("run_id", "barrier_id", "dataset_id", "direction", name="uq_snapshot_lineage"),
    )
    op.create_index("ix_snapshot_lineage_dataset", "snapshot_lineage", ["dataset_id", "snapshot_id"])
    op.create_index("ix_snapshot_lineage_job_barrier", "snapshot_lineage", ["job_id", "barrier_id"])
    op.create_table(
        "partition_lineage",
        _id(),
        _fk("snapshot_lineage_id", "snapshot_lineage.id"),
        _fk("dataset_id", "datasets.id"),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("partition_name", sa.String(512), nullable=False),
        sa.UniqueConstraint("snapshot_lineage_id", "partition_name", name="uq_partition_lineage"),
    )
    op.create_index("ix_partition_lineage_dataset", "partition_lineage", ["dataset_id", "partition_name", "direction"])
    op.create_table(
        "lineage_events",
        _id(),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("event_time", TIME, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("event_type", sa.String(16)),
        sa.Column("run_uuid", sa.String(36)),
        sa.Column("job_namespace", sa.String(1024)),
        sa.Column("job_name", sa.String(1024)),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("received_at", TIME, nullable=False),
    )
    if not sqlite:
        # a zstd frame already: TOAST may move a large one out of line but must not compress it again
        op.execute("ALTER TABLE lineage_events ALTER COLUMN payload SET STORAGE EXTERNAL")
    op.create_index("ix_lineage_events_time", "lineage_events", ["event_time"])
    op.create_index("ix_lineage_events_run", "lineage_events", ["run_uuid"])
    op.create_index("ix_lineage_events_job", "lineage_events", ["job_namespace", "job_name"])
    op.create_table(
        "raw_event_dictionaries",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
    )
    op.create_table(
        "change_outbox",
        _id(),
        sa.Column("message_key", sa.LargeBinary(), nullable=False),
        sa.Column("message", sa.LargeBinary(), nullable=False),
    )
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    """An empty database: the views, then every table, each before the tables it references."""
    for name in VIEWS:
        op.execute(f"DROP VIEW {name}")
    for name in (
        "change_outbox",
        "raw_event_dictionaries",
        "lineage_events",
        "partition_lineage",
        "snapshot_lineage",
        "column_lineage",
        "job_io",
        "job_tags",
        "dataset_tags",
        "dataset_versions",
        "runs",
        "dataset_version_contents",
        "dataset_fields",
        "datasets",
    ):
        op.drop_table(name)
    # The cycle: PostgreSQL drops the jobs' references first; SQLite drops jobs first (its
    # versions go with it, ON DELETE CASCADE) and then job_versions, which nothing references then.
    if op.get_bind().dialect.name == "sqlite":
        op.drop_table("jobs")
        op.drop_table("job_versions")
    else:
        for name, _ in JOB_VERSION_REFERENCES:
            op.drop_constraint(name, "jobs", type_="foreignkey")
        op.drop_table("job_versions")
        op.drop_table("jobs")
    op.drop_table("tags")
    op.drop_table("namespaces")


def _job_view(direction: str) -> str:
    return f"""
        SELECT j.name AS job, d.database_name AS "database", d.table_name AS "table",
               io.first_seen AS create_time
        FROM job_io io JOIN jobs j ON j.id = io.job_id JOIN datasets d ON d.id = io.dataset_id
        WHERE io.direction = '{direction}'"""


def _snapshot_view(direction: str) -> str:
    return f"""
        SELECT j.name AS job, s.barrier_id AS barrier_id, d.database_name AS "database",
               d.table_name AS "table", s.snapshot_id AS snapshot_id, s.created_at AS create_time
        FROM snapshot_lineage s JOIN jobs j ON j.id = s.job_id JOIN datasets d ON d.id = s.dataset_id
        WHERE s.direction = '{direction}'"""


def _partition_view(direction: str) -> str:
    return f"""
        SELECT j.name AS job, s.barrier_id AS barrier_id, d.database_name AS "database",
               d.table_name AS "table", s.snapshot_id AS snapshot_id, p.partition_name AS "partition",
               s.created_at AS create_time
        FROM partition_lineage p JOIN snapshot_lineage s ON s.id = p.snapshot_lineage_id
        JOIN jobs j ON j.id = s.job_id JOIN datasets d ON d.id = p.dataset_id
        WHERE p.direction = '{direction}'"""


# The Paimon lineage proposal's views (PIP "Lineage"; `job` is the job name), and in the same
# style one row per partition read or written.
VIEWS = {
    "source_job_lineage": _job_view("input"),
    "sink_job_lineage": _job_view("output"),
    "source_snapshot_lineage": _snapshot_view("input"),
    "sink_snapshot_lineage": _snapshot_view("output"),
    "source_partition_lineage": _partition_view("input"),
    "sink_partition_lineage": _partition_view("output"),
}
