"""`change_outbox`: lineage-change messages written in the store transaction that made the
change, deleted once published (consumer.ingest.change_publishing).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_outbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("message_key", sa.LargeBinary(), nullable=False),
        sa.Column("message", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("change_outbox")
