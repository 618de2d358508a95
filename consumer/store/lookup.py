"""Row ids of named namespaces, jobs and datasets, and the one not-found error: the lookups both the
write side (tags) and the read side use. `NotFound` messages name what is missing; the API answers 404."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import Connection, Table, select

from consumer.store import schema as s

Found = TypeVar("Found")


class NotFound(LookupError):
    """The namespace, job, dataset, field, run, snapshot or tag named is not in the store."""


def present(found: Found | None, missing: str) -> Found:
    """`found`, or `NotFound(missing)` when the lookup gave nothing."""
    if found is None:
        raise NotFound(missing)
    return found


def job_row_id(conn: Connection, namespace: str, name: str) -> int | None:
    return _row_id(conn, s.jobs, namespace, name)


def dataset_row_id(conn: Connection, namespace: str, name: str) -> int | None:
    return _row_id(conn, s.datasets, namespace, name)


def existing_job_id(conn: Connection, namespace: str, name: str) -> int:
    return present(job_row_id(conn, namespace, name), f"job '{name}' not found in namespace '{namespace}'")


def existing_dataset_id(conn: Connection, namespace: str, name: str) -> int:
    return present(dataset_row_id(conn, namespace, name), f"dataset '{name}' not found in namespace '{namespace}'")


def existing_namespace_id(conn: Connection, name: str) -> int:
    found = conn.execute(select(s.namespaces.c.id).where(s.namespaces.c.name == name)).scalar()
    return present(found, f"namespace '{name}' not found")


def _row_id(conn: Connection, table: Table, namespace: str, name: str) -> int | None:
    return conn.execute(
        select(table.c.id)
        .join(s.namespaces, s.namespaces.c.id == table.c.namespace_id)
        .where(s.namespaces.c.name == namespace, table.c.name == name)
    ).scalar()
