"""Raw events stored compressed: `lineage_events.payload` becomes the zstd frame of the event's
text (consumer.store.compressed_text) instead of the text. Every stored event is compressed in
place, a thousand at a time; the downgrade writes the texts back.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

from consumer.store.compressed_text import compress, decompress

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CHUNK = 1000


def upgrade() -> None:
    _convert(sa.Text(), sa.LargeBinary(), compress)
    if op.get_bind().dialect.name == "postgresql":
        # compressed already: TOAST may move a large one out of line but must not compress it again
        op.execute("ALTER TABLE lineage_events ALTER COLUMN payload SET STORAGE EXTERNAL")


def downgrade() -> None:
    _convert(sa.LargeBinary(), sa.Text(), decompress)


def _convert(old_type: Any, new_type: Any, convert: Callable[[Any], Any]) -> None:
    """`payload` rewritten as `convert(payload)` of `new_type`, through a column of its own."""
    op.add_column("lineage_events", sa.Column("payload_converted", new_type, nullable=True))
    events = sa.table(
        "lineage_events", sa.column("id", sa.Integer), sa.column("payload", old_type), sa.column("payload_converted", new_type)
    )
    connection = op.get_bind()
    last = 0
    while True:
        rows = connection.execute(
            sa.select(events.c.id, events.c.payload).where(events.c.id > last).order_by(events.c.id).limit(CHUNK)
        ).all()
        if not rows:
            break
        connection.execute(
            events.update().where(events.c.id == sa.bindparam("row_id")).values(payload_converted=sa.bindparam("converted")),
            [{"row_id": row.id, "converted": convert(row.payload)} for row in rows],
        )
        last = rows[-1].id
    with op.batch_alter_table("lineage_events") as batch:
        batch.drop_column("payload")
        batch.alter_column("payload_converted", new_column_name="payload", existing_type=new_type, nullable=False)
