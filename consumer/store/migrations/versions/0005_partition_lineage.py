"""Partition-level data lineage: `partition_lineage` (the partitions each run or micro-batch read and
wrote, per snapshot_lineage row) and the views `source_partition_lineage` / `sink_partition_lineage`.
Stores written before hold no partition rows until they are replayed (`consumer replay`).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "partition_lineage",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("snapshot_lineage_id", ID, sa.ForeignKey("snapshot_lineage.id", ondelete="CASCADE"), nullable=False),
        sa.Column("dataset_id", ID, sa.ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("partition_name", sa.String(512), nullable=False),
        sa.UniqueConstraint("snapshot_lineage_id", "partition_name", name="uq_partition_lineage"),
    )
    op.create_index("ix_partition_lineage_dataset", "partition_lineage", ["dataset_id", "partition_name", "direction"])
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.drop_table("partition_lineage")


def _partition_view(direction: str) -> str:
    return f"""
        SELECT j.name AS job, s.barrier_id AS barrier_id, d.database_name AS "database",
               d.table_name AS "table", s.snapshot_id AS snapshot_id, p.partition_name AS "partition",
               s.created_at AS create_time
        FROM partition_lineage p JOIN snapshot_lineage s ON s.id = p.snapshot_lineage_id
        JOIN jobs j ON j.id = s.job_id JOIN datasets d ON d.id = p.dataset_id
        WHERE p.direction = '{direction}'"""


# The snapshot views of the Paimon lineage proposal, one row per partition read or written.
VIEWS = {
    "source_partition_lineage": _partition_view("input"),
    "sink_partition_lineage": _partition_view("output"),
}
