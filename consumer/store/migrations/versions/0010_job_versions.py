"""What a job does, stored once per version: `job_versions` (a run's inputs, outputs and column-
lineage edges under the hash of that content), `runs.job_version_id`, and `jobs.current_version_id`
(the version the walks answer on; `declared_version_id`/`declared_at` for JobEvents). `job_io` and
`column_lineage` hold each job's current version only and lose their per-run columns (`last_seen`,
`last_run_id`; `first_seen` of column_lineage), which every repeated run rewrote; column-lineage rows
are kept per job. A field's clock (the time of the newest schema that carried it) moves from
`dataset_fields.updated_at` to its dataset's `merged_at`.

In place: each job's stored table and column lineage becomes one version (its declared version,
current), so every answer stays what it was; its next run with the same lineage points to that
same version. The downgrade puts the columns back (`last_seen` as `first_seen`, no last run).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from consumer.store.rows import LineageFold, lineage_content, lineage_hash

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIME = sa.DateTime(timezone=True)
FIELD = "fields."
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # consumer.store.rows.STAMP

job_versions = sa.table(
    "job_versions",
    sa.column("id", ID),
    sa.column("job_id", ID),
    sa.column("lineage_hash", sa.String),
    sa.column("content", JSON),
    sa.column("created_at", TIME),
)


def _job_view(direction: str) -> str:
    return f"""
        SELECT j.name AS job, d.database_name AS "database", d.table_name AS "table",
               io.first_seen AS create_time
        FROM job_io io JOIN jobs j ON j.id = io.job_id JOIN datasets d ON d.id = io.dataset_id
        WHERE io.direction = '{direction}'"""


# The Paimon job views read job_io: SQLite cannot rebuild a table a view names.
JOB_VIEWS = {"source_job_lineage": _job_view("input"), "sink_job_lineage": _job_view("output")}


def upgrade() -> None:
    op.create_table(
        "job_versions",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("job_id", ID, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("lineage_hash", sa.String(64), nullable=False),
        sa.Column("content", JSON, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.UniqueConstraint("job_id", "lineage_hash", name="uq_job_versions_job_hash"),
    )
    _add_reference("jobs", "current_version_id", "fk_jobs_current_version")
    _add_reference("jobs", "declared_version_id", "fk_jobs_declared_version")
    op.add_column("jobs", sa.Column("declared_at", TIME))
    _add_reference("runs", "job_version_id", "runs_job_version_id_fkey")
    op.create_index("ix_runs_job_version", "runs", ["job_version_id", "created_at"])
    connection = op.get_bind()
    _versions_from_stored_lineage(connection)
    _field_clocks_to_datasets(connection)
    for name in JOB_VIEWS:
        op.execute(f"DROP VIEW {name}")
    with op.batch_alter_table("job_io") as batch:
        batch.drop_column("last_run_id")
        batch.drop_column("last_seen")
    op.drop_index("uq_column_lineage_field", "column_lineage")
    op.drop_index("uq_column_lineage_dataset", "column_lineage")
    op.drop_index("ix_column_lineage_job", "column_lineage")
    with op.batch_alter_table("column_lineage") as batch:
        for column in ("last_run_id", "first_seen", "last_seen"):
            batch.drop_column(column)
    _column_lineage_indexes(("job_id",))
    op.create_index("ix_column_lineage_output_field", "column_lineage", ["output_field_id"])
    with op.batch_alter_table("dataset_fields") as batch:
        batch.drop_column("updated_at")
    for name, body in JOB_VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def _add_reference(table: str, column: str, name: str) -> None:
    """A nullable column referencing job_versions. SQLite adds it with its reference in place (it
    cannot add a constraint later, and rebuilding jobs or runs would break the views and the
    tables that point to them)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER REFERENCES job_versions (id)")
        return
    op.add_column(table, sa.Column(column, ID))
    op.create_foreign_key(name, table, "job_versions", [column], ["id"])


def _column_lineage_indexes(leading: tuple[str, ...]) -> None:
    for name, output, where in (
        ("uq_column_lineage_field", "output_field_id", "output_field_id IS NOT NULL"),
        ("uq_column_lineage_dataset", "output_dataset_id", "output_field_id IS NULL"),
    ):
        op.create_index(
            name,
            "column_lineage",
            [*leading, output, "input_field_id", "transformation_type", "transformation_subtype"],
            unique=True,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )


def _versions_from_stored_lineage(connection: Any) -> None:
    """Each job's stored table and column lineage as one version: its declared and current one."""
    names = {
        row.id: (row.namespace, row.name)
        for row in connection.execute(
            sa.text("SELECT d.id, n.name AS namespace, d.name FROM datasets d JOIN namespaces n ON n.id = d.namespace_id")
        )
    }
    field_names: dict[int, str] = {}
    schemas: dict[Any, list[tuple[str, Any]]] = defaultdict(list)  # a dataset's schema fields, in schema order
    for row in connection.execute(sa.text("SELECT id, dataset_id, name, type, from_schema FROM dataset_fields ORDER BY id")):
        field_names[row.id] = row.name
        if row.from_schema:
            schemas[names[row.dataset_id]].append((row.name, row.type))
    inputs: dict[int, set[Any]] = defaultdict(set)
    outputs: dict[int, set[Any]] = defaultdict(set)
    edges: dict[int, set[Any]] = defaultdict(set)
    since: dict[int, datetime] = {}
    for row in connection.execute(sa.text("SELECT job_id, dataset_id, direction, first_seen FROM job_io")):
        (inputs if row.direction == "input" else outputs)[row.job_id].add(names[row.dataset_id])
        since[row.job_id] = min(_aware(row.first_seen), since.get(row.job_id, _aware(row.first_seen)))
    for row in connection.execute(
        sa.text(
            "SELECT job_id, output_dataset_id, output_field_id, input_dataset_id, input_field_id, transformation_type,"
            " transformation_subtype, transformation_description, masking, first_seen FROM column_lineage"
        )
    ):
        output_field = None if row.output_field_id is None else field_names[row.output_field_id]
        edges[row.job_id].add(
            (
                names[row.output_dataset_id],
                output_field,
                names[row.input_dataset_id],
                field_names[row.input_field_id],
                row.transformation_type,
                row.transformation_subtype,
                row.transformation_description,
                bool(row.masking),
            )
        )
        since[row.job_id] = min(_aware(row.first_seen), since.get(row.job_id, _aware(row.first_seen)))
    jobs = {
        row.id: (row.namespace, row.name, _aware(row.last_seen))
        for row in connection.execute(
            sa.text(
                "SELECT j.id, n.name AS namespace, j.name, j.last_seen FROM jobs j JOIN namespaces n ON n.id = j.namespace_id"
            )
        )
    }
    for job_id in sorted(since):
        namespace, name, last_seen = jobs[job_id]
        named = inputs[job_id] | outputs[job_id]
        lineage = LineageFold(
            (namespace, name),
            frozenset(inputs[job_id]),
            frozenset(outputs[job_id]),
            frozenset(edges[job_id]),
            since[job_id],
            frozenset((dataset, tuple(schemas[dataset])) for dataset in named if schemas.get(dataset)),
        )
        content = lineage_content(lineage)
        version_id = connection.execute(
            job_versions.insert()
            .values(job_id=job_id, lineage_hash=lineage_hash(content), content=content, created_at=since[job_id])
            .returning(job_versions.c.id)
        ).scalar_one()
        connection.execute(
            sa.text(
                "UPDATE jobs SET current_version_id = :version, declared_version_id = :version, declared_at = :at WHERE id = :job"
            ),
            {"version": version_id, "at": last_seen, "job": job_id},
        )


def _field_clocks_to_datasets(connection: Any) -> None:
    """Each schema field's updated_at as a clock in its dataset's merged_at."""
    clocks: dict[int, dict[str, str]] = defaultdict(dict)
    for row in connection.execute(
        sa.text("SELECT dataset_id, name, updated_at FROM dataset_fields WHERE from_schema = :yes"), {"yes": True}
    ):
        clocks[row.dataset_id][f"{FIELD}{row.name}"] = _aware(row.updated_at).strftime(STAMP)
    merged = sa.table("datasets", sa.column("id", ID), sa.column("merged_at", JSON))
    for dataset_id, times in sorted(clocks.items()):
        stored = connection.execute(sa.select(merged.c.merged_at).where(merged.c.id == dataset_id)).scalar_one()
        connection.execute(merged.update().where(merged.c.id == dataset_id).values(merged_at={**(stored or {}), **times}))


def _aware(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def downgrade() -> None:
    for name in JOB_VIEWS:
        op.execute(f"DROP VIEW {name}")
    with op.batch_alter_table("dataset_fields") as batch:
        batch.add_column(sa.Column("updated_at", TIME))
    op.execute("UPDATE dataset_fields SET updated_at = created_at")
    with op.batch_alter_table("dataset_fields") as batch:
        batch.alter_column("updated_at", existing_type=TIME, nullable=False)
    op.drop_index("ix_column_lineage_output_field", "column_lineage")
    op.drop_index("uq_column_lineage_field", "column_lineage")
    op.drop_index("uq_column_lineage_dataset", "column_lineage")
    with op.batch_alter_table("column_lineage") as batch:
        batch.add_column(sa.Column("last_run_id", ID))
        batch.add_column(sa.Column("first_seen", TIME))
        batch.add_column(sa.Column("last_seen", TIME))
    # one row per edge again (the newest job's), as before
    op.execute(
        "DELETE FROM column_lineage WHERE id NOT IN (SELECT max(id) FROM column_lineage GROUP BY"
        " output_dataset_id, output_field_id, input_field_id, transformation_type, transformation_subtype)"
    )
    op.execute(
        "UPDATE column_lineage SET first_seen = (SELECT j.created_at FROM jobs j WHERE j.id = column_lineage.job_id),"
        " last_seen = (SELECT j.last_seen FROM jobs j WHERE j.id = column_lineage.job_id)"
    )
    with op.batch_alter_table("column_lineage") as batch:
        batch.alter_column("first_seen", existing_type=TIME, nullable=False)
        batch.alter_column("last_seen", existing_type=TIME, nullable=False)
    _column_lineage_indexes(())
    op.create_index("ix_column_lineage_job", "column_lineage", ["job_id"])
    with op.batch_alter_table("job_io") as batch:
        batch.add_column(sa.Column("last_seen", TIME))
        batch.add_column(sa.Column("last_run_id", ID))
    op.execute("UPDATE job_io SET last_seen = first_seen")
    with op.batch_alter_table("job_io") as batch:
        batch.alter_column("last_seen", existing_type=TIME, nullable=False)
        batch.create_foreign_key("job_io_last_run_id_fkey", "runs", ["last_run_id"], ["id"], ondelete="SET NULL")
    op.drop_index("ix_runs_job_version", "runs")
    for table, columns, names in (
        ("runs", ("job_version_id",), ("runs_job_version_id_fkey",)),
        (
            "jobs",
            ("current_version_id", "declared_version_id", "declared_at"),
            ("fk_jobs_current_version", "fk_jobs_declared_version"),
        ),
    ):
        if op.get_bind().dialect.name != "sqlite":
            for name in names:
                op.drop_constraint(name, table, type_="foreignkey")
        for column in columns:
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    op.drop_table("job_versions")
    for name, body in JOB_VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")
