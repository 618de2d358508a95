"""Indexes retention's deletes need: the foreign keys to a deleted run (`jobs.latest_run_id`) and
to a deleted version content (`dataset_versions.content_id`) are checked by an index lookup
instead of a scan of the whole referencing table per deleted row.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_latest_run", "jobs", ["latest_run_id"])
    op.create_index("ix_dataset_versions_content", "dataset_versions", ["content_id"])


def downgrade() -> None:
    op.drop_index("ix_dataset_versions_content", table_name="dataset_versions")
    op.drop_index("ix_jobs_latest_run", table_name="jobs")
