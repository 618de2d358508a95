"""Dataset versions point to their content, stored once: `dataset_version_contents` holds each
distinct (fields, facets but the per-version ones) under its hash; `dataset_versions` keeps its
run, time, per-version facets and `content_id`, and loses `fields`. Every stored version is moved
in place, a thousand at a time; the downgrade copies the contents back into each version.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from consumer import json_codec
from consumer.store.rows import version_content_hash

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CHUNK = 1000
JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# As consumer.store.rows.PER_VERSION_FACETS when this revision was written.
PER_VERSION_FACETS = frozenset(
    {"version", "snapshot", "inputStatistics", "outputStatistics", "dataQualityMetrics", "dataQualityAssertions"}
)

contents = sa.table(
    "dataset_version_contents",
    sa.column("id", ID),
    sa.column("content_hash", sa.String),
    sa.column("fields", JSON),
    sa.column("facets", JSON),
)
versions = sa.table(
    "dataset_versions",
    sa.column("id", ID),
    sa.column("fields", JSON),
    sa.column("facets", JSON),
    sa.column("content_id", ID),
)


def upgrade() -> None:
    op.create_table(
        "dataset_version_contents",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("fields", JSON),
        sa.Column("facets", JSON, nullable=False),
    )
    op.add_column("dataset_versions", sa.Column("content_id", ID, nullable=True))
    connection = op.get_bind()
    content_ids: dict[str, int] = {}
    for rows in _chunks(connection, sa.select(versions.c.id, versions.c.fields, versions.c.facets)):
        moved = []
        for row in rows:
            fields, content, own = _split(row.fields, row.facets or {})
            content_hash = version_content_hash(
                None if fields is None else json_codec.dumps_bytes(fields), json_codec.encode_members(content)
            )
            if content_hash not in content_ids:
                content_ids[content_hash] = connection.execute(
                    contents.insert().values(content_hash=content_hash, fields=fields, facets=content).returning(contents.c.id)
                ).scalar_one()
            moved.append({"row_id": row.id, "content": content_ids[content_hash], "own": own})
        connection.execute(
            versions.update()
            .where(versions.c.id == sa.bindparam("row_id"))
            .values(content_id=sa.bindparam("content"), facets=sa.bindparam("own")),
            moved,
        )
    with op.batch_alter_table("dataset_versions") as batch:
        batch.drop_column("fields")
        batch.alter_column("content_id", existing_type=ID, nullable=False)
        batch.create_foreign_key("dataset_versions_content_id_fkey", "dataset_version_contents", ["content_id"], ["id"])


def downgrade() -> None:
    op.add_column("dataset_versions", sa.Column("fields", JSON))
    connection = op.get_bind()
    query = sa.select(versions.c.id, versions.c.facets, contents.c.fields, contents.c.facets.label("content_facets")).join(
        contents, contents.c.id == versions.c.content_id
    )
    for rows in _chunks(connection, query):
        connection.execute(
            versions.update()
            .where(versions.c.id == sa.bindparam("row_id"))
            .values(fields=sa.bindparam("all_fields"), facets=sa.bindparam("all_facets")),
            [
                {"row_id": row.id, "all_fields": row.fields, "all_facets": {**(row.content_facets or {}), **(row.facets or {})}}
                for row in rows
            ],
        )
    with op.batch_alter_table("dataset_versions") as batch:
        batch.drop_constraint("dataset_versions_content_id_fkey", type_="foreignkey")
        batch.drop_column("content_id")
    op.drop_table("dataset_version_contents")


def _chunks(connection: Any, query: Any) -> Any:
    last = 0
    while True:
        rows = connection.execute(query.where(versions.c.id > last).order_by(versions.c.id).limit(CHUNK)).all()
        if not rows:
            return
        yield rows
        last = rows[-1].id


def _split(fields: Any, facets: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(fields in the writer's key order, the content's facets, the version's own facets)."""
    if fields is not None:
        fields = [
            {"name": f.get("name"), "type": f.get("type"), "description": f.get("description"), "tags": f.get("tags")}
            for f in fields
        ]
    content = {name: value for name, value in facets.items() if name not in PER_VERSION_FACETS}
    own = {name: value for name, value in facets.items() if name in PER_VERSION_FACETS}
    return fields, content, own
