"""Alembic's `alembic_version` records the schema's revision: drop the hand-kept `schema_version`.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("schema_version")


def downgrade() -> None:
    raise NotImplementedError("the store is never downgraded: restore a backup instead")
