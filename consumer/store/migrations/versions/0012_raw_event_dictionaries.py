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
from consumer.store.migrations.chunks import rewrite

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


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

    def plain(payload: bytes) -> bytes | None:
        return None if dictionary_id(payload) == NO_DICTIONARY else compress(decompress(payload, known.__getitem__))

    rewrite(connection, events, "payload", "payload", plain)
    op.drop_table("raw_event_dictionaries")
