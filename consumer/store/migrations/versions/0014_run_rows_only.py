"""A run writes its own rows only: `run_states` and `jobs.latest_run_id` go.

- `run_states` held one row per transition of every run, which no answer read: the transitions
  are the run's raw events (`lineage_events`: `run_uuid`, `event_type`, `event_time`).
- `jobs.latest_run_id` was rewritten on every job by every batch that ran it: the job's latest run
  is now looked up when it is asked for (`schema.latest_run`, on `ix_runs_job_created`).

The downgrade rebuilds both from what is stored: the transitions from the raw events, each job's
latest run by the same lookup.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The table constraint revision 0001 wrote into `jobs` on SQLite.
_LATEST_RUN_KEY = re.compile(
    r",\s*CONSTRAINT fk_jobs_latest_run FOREIGN KEY\s*\(latest_run_id\)\s*REFERENCES runs \(id\) ON DELETE SET NULL"
)
_STATE_OF_EVENT_TYPE = (
    "CASE e.event_type WHEN 'START' THEN 'RUNNING' WHEN 'RUNNING' THEN 'RUNNING' WHEN 'COMPLETE' THEN 'COMPLETED' "
    "WHEN 'FAIL' THEN 'FAILED' WHEN 'ABORT' THEN 'ABORTED' ELSE 'NEW' END"
)


def upgrade() -> None:
    op.drop_table("run_states")
    op.drop_index("ix_jobs_latest_run", table_name="jobs")
    if op.get_bind().dialect.name == "sqlite":
        _drop_latest_run_on_sqlite(op.get_bind())
    else:
        op.drop_column("jobs", "latest_run_id")


def _drop_latest_run_on_sqlite(connection: sa.Connection) -> None:
    """SQLite's own ALTER TABLE drops the column in place (rebuilding `jobs`, which other tables'
    foreign keys cascade from, would not be safe), but not while a table constraint names it: the
    foreign key 0001 declared is taken out of the table's definition first, the way SQLite's
    documentation gives for changes that leave the stored rows as they are."""
    definition = connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").scalar_one()
    without_key = _LATEST_RUN_KEY.sub("", definition)
    if without_key != definition:
        schema_version = connection.exec_driver_sql("PRAGMA schema_version").scalar_one()
        connection.exec_driver_sql("PRAGMA writable_schema = ON")
        connection.execute(
            sa.text("UPDATE sqlite_master SET sql = :definition WHERE type = 'table' AND name = 'jobs'"),
            {"definition": without_key},
        )
        connection.exec_driver_sql(f"PRAGMA schema_version = {int(schema_version) + 1}")
        connection.exec_driver_sql("PRAGMA writable_schema = OFF")
    connection.exec_driver_sql("ALTER TABLE jobs DROP COLUMN latest_run_id")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "ALTER TABLE jobs ADD COLUMN latest_run_id INTEGER "
            "CONSTRAINT fk_jobs_latest_run REFERENCES runs (id) ON DELETE SET NULL"
        )
    else:
        op.add_column("jobs", sa.Column("latest_run_id", sa.BigInteger()))
        op.create_foreign_key("fk_jobs_latest_run", "jobs", "runs", ["latest_run_id"], ["id"], ondelete="SET NULL")
    op.execute(
        "UPDATE jobs SET latest_run_id = (SELECT r.id FROM runs r WHERE r.job_id = jobs.id "
        "ORDER BY r.created_at DESC, r.uuid DESC LIMIT 1)"
    )
    op.create_index("ix_jobs_latest_run", "jobs", ["latest_run_id"])
    identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "run_states",
        sa.Column("id", identifier, primary_key=True, autoincrement=True),
        sa.Column("run_id", identifier, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("event_type", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("transitioned_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("run_id", "event_type", "transitioned_at", name="uq_run_states"),
    )
    op.execute(
        "INSERT INTO run_states (run_id, event_type, state, transitioned_at) "
        f"SELECT DISTINCT r.id, coalesce(e.event_type, 'OTHER'), {_STATE_OF_EVENT_TYPE}, e.event_time "
        "FROM lineage_events e JOIN runs r ON r.uuid = lower(e.run_uuid) WHERE e.kind = 'RunEvent'"
    )
