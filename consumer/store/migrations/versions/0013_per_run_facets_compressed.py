"""Per-run facets stored compressed: `runs.facets` and `dataset_versions.facets` become zstd frames
of their JSON text made with a built-in dictionary (consumer.store.schema.CompressedJson). Every row
is rewritten, a thousand at a time, into a new column that then replaces the old one (on SQLite with
its own ALTER TABLE, which since 3.35 drops a column in place: rebuilding `runs`, which other
tables' foreign keys cascade from, would not be safe). The downgrade writes the JSON back.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from consumer import json_codec
from consumer.store.compressed_text import compress_facets, decompress_facets
from consumer.store.migrations.chunks import rewrite

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
TABLES = ("runs", "dataset_versions")


def upgrade() -> None:
    for table in TABLES:
        _convert(table, sa.LargeBinary(), _compressed)


def downgrade() -> None:
    for table in TABLES:
        _convert(table, sa.JSON().with_variant(JSONB(), "postgresql"), _decompressed)


def _compressed(value: Any) -> bytes:
    """A stored JSON value (SQLite: its text; PostgreSQL: the decoded value) as a frame."""
    return compress_facets(value if isinstance(value, str) else json_codec.dumps(value))


def _decompressed(value: Any) -> Any:
    return json_codec.loads(decompress_facets(bytes(value)))


def _convert(table: str, new_type: Any, convert: Callable[[Any], Any]) -> None:
    """`facets` rewritten as `convert(facets)` of `new_type`, through a column of its own."""
    connection = op.get_bind()
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:  # a NOT NULL column added to rows that exist needs a default; the rewrite replaces it
        placeholder = "x''" if isinstance(new_type, sa.LargeBinary) else "'{}'"
        kind = "BLOB" if isinstance(new_type, sa.LargeBinary) else "JSON"
        op.execute(f"ALTER TABLE {table} ADD COLUMN facets_converted {kind} NOT NULL DEFAULT {placeholder}")
    else:
        op.add_column(table, sa.Column("facets_converted", new_type, nullable=True))
    rows_of = sa.table(table, sa.column("id", sa.Integer), sa.column("facets"), sa.column("facets_converted", new_type))
    rewrite(connection, rows_of, "facets", "facets_converted", convert)
    if sqlite:
        op.execute(f"ALTER TABLE {table} DROP COLUMN facets")
        op.execute(f"ALTER TABLE {table} RENAME COLUMN facets_converted TO facets")
    else:
        op.drop_column(table, "facets")
        op.alter_column(table, "facets_converted", new_column_name="facets", nullable=False)
