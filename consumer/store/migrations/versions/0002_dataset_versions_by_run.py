"""Index dataset versions by the run that wrote them (the runs API reads a run's versions).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_dataset_versions_run", "dataset_versions", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_dataset_versions_run", table_name="dataset_versions")
