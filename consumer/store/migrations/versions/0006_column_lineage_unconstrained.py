"""`column_lineage` without foreign-key constraints: on PostgreSQL their per-row checks cost more
than the rest of the table's bulk writes. The writer resolves every id it stores in the same
transaction, and nothing deletes the rows they point to.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Column -> (referenced table, ON DELETE action), as revision 0001 created them.
REFERENCES = {
    "output_dataset_id": ("datasets", "CASCADE"),
    "output_field_id": ("dataset_fields", "CASCADE"),
    "input_dataset_id": ("datasets", "CASCADE"),
    "input_field_id": ("dataset_fields", "CASCADE"),
    "job_id": ("jobs", "CASCADE"),
    "last_run_id": ("runs", "SET NULL"),
}
# PostgreSQL's own names for these constraints; SQLite's unnamed ones are given the same names.
NAMES = {"fk": "%(table_name)s_%(column_0_name)s_fkey"}


def upgrade() -> None:
    with op.batch_alter_table("column_lineage", naming_convention=NAMES) as batch:
        for column in REFERENCES:
            batch.drop_constraint(f"column_lineage_{column}_fkey", type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("column_lineage", naming_convention=NAMES) as batch:
        for column, (table, on_delete) in REFERENCES.items():
            batch.create_foreign_key(f"column_lineage_{column}_fkey", table, [column], ["id"], ondelete=on_delete)
