"""`raw_event_dictionaries`: the zstd dictionaries raw events are compressed with once the store
holds enough of them (consumer.store.raw_dictionaries). The upgrade only adds the table: stored
frames stay as they are (a frame names its dictionary, none before this). The downgrade makes every
frame that names a dictionary a frame without one again, a thousand at a time, then drops the table.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.store.compressed_text import NO_DICTIONARY, Dictionary, compress, decompress, dictionary_id

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

CHUNK = 1000


def upgrade() -> None:
    op.create_table(
        "raw_event_dictionaries",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    connection = op.get_bind()
    dictionaries = sa.table("raw_event_dictionaries", sa.column("id", sa.BigInteger), sa.column("data", sa.LargeBinary))
    known = {
        row.id: Dictionary(row.id, bytes(row.data))
        for row in connection.execute(sa.select(dictionaries.c.id, dictionaries.c.data))
    }
    events = sa.table("lineage_events", sa.column("id", sa.Integer), sa.column("payload", sa.LargeBinary))
    last = 0
    while True:
        rows = connection.execute(
            sa.select(events.c.id, events.c.payload).where(events.c.id > last).order_by(events.c.id).limit(CHUNK)
        ).all()
        if not rows:
            break
        plain = [
            {"row_id": row.id, "plain": compress(decompress(row.payload, known.__getitem__))}
            for row in rows
            if dictionary_id(row.payload) != NO_DICTIONARY
        ]
        if plain:
            connection.execute(
                events.update().where(events.c.id == sa.bindparam("row_id")).values(payload=sa.bindparam("plain")), plain
            )
        last = rows[-1].id
    op.drop_table("raw_event_dictionaries")
