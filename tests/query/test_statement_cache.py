"""Read-side statements built once per kind of database (`consumer.query.db.statement_cache`), their
id lists bound when they run (`ids_in`): one built statement answers lists of any length, on
SQLite (an expanded list) and PostgreSQL (one array parameter)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Select, insert, select

from consumer.query.db import ids_in, statement_cache
from consumer.store import schema as s


def test_one_statement_answers_id_lists_of_any_length(store: Any) -> None:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with store.engine.begin() as conn:
        conn.execute(
            insert(s.tags), [{"id": i, "name": f"tag{i:02}", "created_at": now, "updated_at": now} for i in range(1, 21)]
        )
    built: list[str] = []

    @statement_cache
    def _tag_names(dialect: str) -> Select[Any]:
        built.append(dialect)
        return select(s.tags.c.name).where(ids_in(dialect, s.tags.c.id, "tags")).order_by(s.tags.c.name)

    with store.engine.connect() as conn:
        answers = {
            length: conn.execute(_tag_names(conn), {"tags": list(range(1, length + 1))}).scalars().all()
            for length in (0, 1, 3, 20)
        }
        assert _tag_names(conn) is _tag_names(conn)
    assert answers == {length: [f"tag{i:02}" for i in range(1, length + 1)] for length in (0, 1, 3, 20)}
    assert built == [store.engine.dialect.name]
