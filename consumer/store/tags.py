"""Tag writes (Marquez's tag routes): the only writes that do not come from ingested events.

Each function runs in its own transaction and raises `NotFound` (consumer.store.lookup) naming what it
could not find; the API answers that with 404 and then reads the updated job or dataset back. Since replay
rebuilds jobs, datasets and fields from the raw events, it keeps the tag assignments by name
(`saved_assignments`) and puts them back afterwards (`restore_assignments`).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import attrs
from sqlalchemy import Connection, Table, select

from consumer.store import schema as s
from consumer.store.lookup import dataset_row_id, existing_dataset_id, existing_job_id, job_row_id, present


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _names(value: Any) -> list[str]:
    return (json.loads(value) if isinstance(value, (str, bytes)) else value) or []


def put_tag(store: Any, name: str, description: str | None) -> dict[str, Any]:
    """Create the tag or replace its description."""
    with store.engine.begin() as conn:
        found = conn.execute(select(s.tags.c.id).where(s.tags.c.name == name)).scalar()
        if found is None:
            conn.execute(s.tags.insert().values(name=name, description=description, created_at=_now(), updated_at=_now()))
        else:
            conn.execute(s.tags.update().where(s.tags.c.id == found).values(description=description, updated_at=_now()))
    return {"name": name, "description": description}


def delete_tag(store: Any, name: str) -> dict[str, Any]:
    """Remove the tag everywhere (jobs, datasets, fields), then the tag itself; the deleted tag."""
    with store.engine.begin() as conn:
        row = present(conn.execute(select(s.tags).where(s.tags.c.name == name)).first(), f"tag '{name}' not found")
        conn.execute(s.job_tags.delete().where(s.job_tags.c.tag_id == row.id))
        conn.execute(s.dataset_tags.delete().where(s.dataset_tags.c.tag_id == row.id))
        fields = select(s.dataset_fields.c.id, s.dataset_fields.c.tags).where(s.dataset_fields.c.tags.is_not(None))
        for field_id, tags in conn.execute(fields).all():
            names = _names(tags)
            if name in names:
                conn.execute(
                    s.dataset_fields.update()
                    .where(s.dataset_fields.c.id == field_id)
                    .values(tags=[t for t in names if t != name])
                )
        conn.execute(s.tags.delete().where(s.tags.c.id == row.id))
    return {"name": row.name, "description": row.description}


def tag_job(store: Any, namespace: str, job: str, tag: str, *, add: bool) -> None:
    with store.engine.begin() as conn:
        _set_link(conn, s.job_tags, "job_id", existing_job_id(conn, namespace, job), tag, add)


def tag_dataset(store: Any, namespace: str, dataset: str, tag: str, *, add: bool) -> None:
    with store.engine.begin() as conn:
        _set_link(conn, s.dataset_tags, "dataset_id", existing_dataset_id(conn, namespace, dataset), tag, add)


def tag_field(store: Any, namespace: str, dataset: str, field: str, tag: str, *, add: bool) -> None:
    """Field tags live in the field row's `tags` list (as ingestion stores a schema facet's field tags).
    The row's `updated_at` stays the event time of its schema, so a later schema still replaces the
    type and description, and ingestion keeps these tags when the schema carries none."""
    with store.engine.begin() as conn:
        row = present(
            conn.execute(
                select(s.dataset_fields.c.id, s.dataset_fields.c.tags).where(
                    s.dataset_fields.c.dataset_id == existing_dataset_id(conn, namespace, dataset),
                    s.dataset_fields.c.name == field,
                )
            ).first(),
            f"field '{field}' not found in dataset '{dataset}' of namespace '{namespace}'",
        )
        names = [t for t in _names(row.tags) if t != tag]
        if add:
            _tag_id(conn, tag)
            names = sorted([*names, tag])
        conn.execute(s.dataset_fields.update().where(s.dataset_fields.c.id == row.id).values(tags=names))


def _tag_id(conn: Connection, name: str) -> int:
    """The tag's id; a tag named for the first time is created (without description), so tagging never fails on it."""
    found = conn.execute(select(s.tags.c.id).where(s.tags.c.name == name)).scalar()
    if found is not None:
        return found
    return conn.execute(
        s.tags.insert().values(name=name, description=None, created_at=_now(), updated_at=_now()).returning(s.tags.c.id)
    ).scalar_one()


def _set_link(conn: Connection, link: Table, owner_column: str, owner: int, tag: str, add: bool) -> None:
    if add:
        tag_id = _tag_id(conn, tag)
        exists = conn.execute(select(link.c.tag_id).where(link.c[owner_column] == owner, link.c.tag_id == tag_id)).first()
        if exists is None:
            conn.execute(link.insert().values({owner_column: owner, "tag_id": tag_id, "tagged_at": _now()}))
        return
    known_tag_id = conn.execute(select(s.tags.c.id).where(s.tags.c.name == tag)).scalar()
    if known_tag_id is not None:
        conn.execute(link.delete().where(link.c[owner_column] == owner, link.c.tag_id == known_tag_id))


@attrs.frozen
class TagAssignments:
    """Which tags are set on what, by name: survives the row ids that replay renumbers."""

    jobs: tuple[tuple[str, str, str], ...]  # (namespace, job, tag)
    datasets: tuple[tuple[str, str, str], ...]  # (namespace, dataset, tag)
    fields: tuple[tuple[str, str, str, tuple[str, ...]], ...]  # (namespace, dataset, field, tags)


def saved_assignments(conn: Connection) -> TagAssignments:
    def linked(link: Table, target: Table, column: str) -> tuple[tuple[str, str, str], ...]:
        query = select(s.namespaces.c.name, target.c.name, s.tags.c.name).select_from(
            link.join(target, target.c.id == link.c[column])
            .join(s.tags, s.tags.c.id == link.c.tag_id)
            .join(s.namespaces, s.namespaces.c.id == target.c.namespace_id)
        )
        return tuple(tuple(row) for row in conn.execute(query))

    fields = conn.execute(
        select(s.namespaces.c.name, s.datasets.c.name, s.dataset_fields.c.name, s.dataset_fields.c.tags)
        .join(s.datasets, s.datasets.c.id == s.dataset_fields.c.dataset_id)
        .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
        .where(s.dataset_fields.c.tags.is_not(None))
    )
    field_tags = ((ns, dataset, field, tuple(_names(tags))) for ns, dataset, field, tags in fields)
    return TagAssignments(
        jobs=linked(s.job_tags, s.jobs, "job_id"),
        datasets=linked(s.dataset_tags, s.datasets, "dataset_id"),
        fields=tuple(row for row in field_tags if row[3]),
    )


def restore_assignments(conn: Connection, saved: TagAssignments) -> None:
    """Set the saved tags again on the jobs, datasets and fields that still exist."""
    for namespace, job, tag in saved.jobs:
        found = job_row_id(conn, namespace, job)
        if found is not None:
            _set_link(conn, s.job_tags, "job_id", found, tag, True)
    for namespace, dataset, tag in saved.datasets:
        found = dataset_row_id(conn, namespace, dataset)
        if found is not None:
            _set_link(conn, s.dataset_tags, "dataset_id", found, tag, True)
    for namespace, dataset, field, names in saved.fields:
        dataset_id = dataset_row_id(conn, namespace, dataset)
        row = (
            None
            if dataset_id is None
            else conn.execute(
                select(s.dataset_fields.c.id, s.dataset_fields.c.tags).where(
                    s.dataset_fields.c.dataset_id == dataset_id, s.dataset_fields.c.name == field
                )
            ).first()
        )
        if row is not None:
            merged = sorted({*_names(row.tags), *names})
            conn.execute(s.dataset_fields.update().where(s.dataset_fields.c.id == row.id).values(tags=merged))
