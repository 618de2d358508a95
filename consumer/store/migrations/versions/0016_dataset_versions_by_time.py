"""A dataset's versions by time (`ix_dataset_versions_dataset_created`): its versions page, its
latest version and its last-modified time are read from the top of the index instead of from
every version the dataset has, so their cost no longer grows with the runs that wrote it.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_dataset_versions_dataset_created", "dataset_versions", ["dataset_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_dataset_versions_dataset_created", table_name="dataset_versions")
