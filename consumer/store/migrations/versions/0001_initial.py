"""Tables, indexes and the Paimon lineage views (the schema as version 1 of the store created it).

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

# Frozen copies of the column types of the time: later schema changes get their own revision.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
TIME = sa.DateTime(timezone=True)
FALSE = sa.text("false")


def _id() -> sa.Column:
    return sa.Column("id", ID, primary_key=True, autoincrement=True)


def _fk(column: str, target: str, ondelete: str = "CASCADE", nullable: bool = False) -> sa.Column:
    return sa.Column(column, ID, sa.ForeignKey(target, ondelete=ondelete), nullable=nullable)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "schema_version",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("applied_at", TIME, nullable=False),
    )
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
    # jobs.latest_run_id -> runs.id closes a cycle: inline on SQLite (no ALTER ADD CONSTRAINT
    # there, forward references allowed), added once `runs` exists elsewhere.
    latest_run = (
        [sa.ForeignKeyConstraint(["latest_run_id"], ["runs.id"], name="fk_jobs_latest_run", ondelete="SET NULL")]
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
        sa.Column("latest_run_id", ID),
        _fk("parent_job_id", "jobs.id", "SET NULL", nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.Column("last_seen", TIME, nullable=False),
        sa.Column("lineage_retired_at", TIME),
        sa.UniqueConstraint("namespace_id", "name", name="uq_jobs_namespace_name"),
        *latest_run,
    )
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
        sa.Column("updated_at", TIME, nullable=False),
        sa.UniqueConstraint("dataset_id", "name", name="uq_dataset_fields_dataset_name"),
    )
    op.create_table(
        "runs",
        _id(),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        _fk("job_id", "jobs.id"),
        sa.Column("run_seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("job_version", sa.String(64)),
        sa.Column("nominal_start_time", TIME),
        sa.Column("nominal_end_time", TIME),
        sa.Column("started_at", TIME),
        sa.Column("ended_at", TIME),
        sa.Column("facets", JSON, nullable=False),
        sa.Column("parent_run_uuid", sa.String(36)),
        sa.Column("parent_job_namespace", sa.String(1024)),
        sa.Column("parent_job_name", sa.String(1024)),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("updated_at", TIME, nullable=False),
        sa.UniqueConstraint("job_id", "run_seq", name="uq_runs_job_seq"),
    )
    op.create_index("ix_runs_job_created", "runs", ["job_id", "created_at"])
    op.create_index("ix_runs_parent", "runs", ["parent_run_uuid"])
    if not sqlite:
        op.create_foreign_key("fk_jobs_latest_run", "jobs", "runs", ["latest_run_id"], ["id"], ondelete="SET NULL")
    op.create_table(
        "dataset_versions",
        _id(),
        _fk("dataset_id", "datasets.id"),
        sa.Column("version", sa.String(128), nullable=False),
        _fk("run_id", "runs.id", "SET NULL", nullable=True),
        sa.Column("fields", JSON),
        sa.Column("facets", JSON, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("dataset_id", "version", name="uq_dataset_versions_dataset_version"),
    )
    for name in ("dataset_tags", "job_tags"):
        owner = "dataset_id" if name == "dataset_tags" else "job_id"
        op.create_table(
            name,
            sa.Column(owner, ID, sa.ForeignKey(f"{owner[:-3]}s.id", ondelete="CASCADE"), primary_key=True),
            sa.Column("tag_id", ID, sa.ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True),
            sa.Column("tagged_at", TIME, nullable=False),
        )
    op.create_table(
        "run_states",
        _id(),
        _fk("run_id", "runs.id"),
        sa.Column("event_type", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("transitioned_at", TIME, nullable=False),
        sa.UniqueConstraint("run_id", "event_type", "transitioned_at", name="uq_run_states"),
    )
    op.create_table(
        "job_io",
        _id(),
        _fk("job_id", "jobs.id"),
        _fk("dataset_id", "datasets.id"),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("first_seen", TIME, nullable=False),
        sa.Column("last_seen", TIME, nullable=False),
        _fk("last_run_id", "runs.id", "SET NULL", nullable=True),
        sa.UniqueConstraint("job_id", "dataset_id", "direction", name="uq_job_io"),
    )
    op.create_index("ix_job_io_dataset", "job_io", ["dataset_id", "direction"])
    op.create_table(
        "column_lineage",
        _id(),
        _fk("output_dataset_id", "datasets.id"),
        _fk("output_field_id", "dataset_fields.id", nullable=True),
        _fk("input_dataset_id", "datasets.id"),
        _fk("input_field_id", "dataset_fields.id"),
        sa.Column("transformation_type", sa.String(16), nullable=False),
        sa.Column("transformation_subtype", sa.String(64), nullable=False),
        sa.Column("transformation_description", sa.Text()),
        sa.Column("masking", sa.Boolean(), nullable=False, server_default=FALSE),
        _fk("job_id", "jobs.id"),
        _fk("last_run_id", "runs.id", "SET NULL", nullable=True),
        sa.Column("first_seen", TIME, nullable=False),
        sa.Column("last_seen", TIME, nullable=False),
    )
    key = ["input_field_id", "transformation_type", "transformation_subtype"]
    for name, first, where in (
        ("uq_column_lineage_field", "output_field_id", "output_field_id IS NOT NULL"),
        ("uq_column_lineage_dataset", "output_dataset_id", "output_field_id IS NULL"),
    ):
        op.create_index(
            name, "column_lineage", [first, *key], unique=True, sqlite_where=sa.text(where), postgresql_where=sa.text(where)
        )
    op.create_index("ix_column_lineage_input_field", "column_lineage", ["input_field_id"])
    op.create_index("ix_column_lineage_output_dataset", "column_lineage", ["output_dataset_id"])
    op.create_index("ix_column_lineage_job", "column_lineage", ["job_id"])
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
        "lineage_events",
        _id(),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("event_time", TIME, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("event_type", sa.String(16)),
        sa.Column("run_uuid", sa.String(36)),
        sa.Column("job_namespace", sa.String(1024)),
        sa.Column("job_name", sa.String(1024)),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received_at", TIME, nullable=False),
    )
    op.create_index("ix_lineage_events_time", "lineage_events", ["event_time"])
    op.create_index("ix_lineage_events_run", "lineage_events", ["run_uuid"])
    op.create_index("ix_lineage_events_job", "lineage_events", ["job_namespace", "job_name"])
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    raise NotImplementedError("the store is never downgraded: restore a backup instead")


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


# Paimon lineage-proposal views (PIP "Lineage"); `job` is the job name.
VIEWS = {
    "source_job_lineage": _job_view("input"),
    "sink_job_lineage": _job_view("output"),
    "source_snapshot_lineage": _snapshot_view("input"),
    "sink_snapshot_lineage": _snapshot_view("output"),
}
