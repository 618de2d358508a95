"""`merged_at` on jobs, datasets and runs: the event time each merged value and facet key came from,
so merging events key by key gives the same row whatever order they arrive in. Rows written before
count every value as of their `updated_at`.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    for table in ("jobs", "datasets", "runs"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("merged_at", JSON))


def downgrade() -> None:
    for table in ("jobs", "datasets", "runs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("merged_at")
