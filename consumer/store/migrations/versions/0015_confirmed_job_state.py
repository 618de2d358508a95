"""A repeated run leaves its job's row as it is: `jobs.state_hash` (the hash of the job's values and
facets as last written) and `runs.job_state` (the job state all the run's events asserted, when
the same), with `ix_runs_job_state` to find the latest run that asserted a job's stored state.

Stored rows keep their values: the columns start empty, so each job's next write fills its hash.
The downgrade first writes into each job's row the times its runs confirmed
(consumer.store.confirmed_state.settle_confirmed), then drops the columns.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.store.confirmed_state import settle_confirmed

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on both databases: SQLite adds and drops these columns in place (rebuilding
    # `jobs` or `runs`, which other tables' foreign keys cascade from, would not be safe).
    op.add_column("jobs", sa.Column("state_hash", sa.BigInteger))
    op.add_column("runs", sa.Column("job_state", sa.BigInteger))
    op.create_index("ix_runs_job_state", "runs", ["job_id", "job_state", "updated_at"])


def downgrade() -> None:
    settle_confirmed(op.get_bind())
    op.drop_index("ix_runs_job_state", table_name="runs")
    op.drop_column("runs", "job_state")
    op.drop_column("jobs", "state_hash")
