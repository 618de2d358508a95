"""Row ids of named jobs and datasets: the one lookup both the write side (tags) and the read side use."""

from __future__ import annotations

from sqlalchemy import Connection, Table, select

from consumer.store import schema as s


def job_row_id(conn: Connection, namespace: str, name: str) -> int | None:
    return _row_id(conn, s.jobs, namespace, name)


def dataset_row_id(conn: Connection, namespace: str, name: str) -> int | None:
    return _row_id(conn, s.datasets, namespace, name)


def _row_id(conn: Connection, table: Table, namespace: str, name: str) -> int | None:
    return conn.execute(
        select(table.c.id).join(s.namespaces, s.namespaces.c.id == table.c.namespace_id)
        .where(s.namespaces.c.name == namespace, table.c.name == name)
    ).scalar()
