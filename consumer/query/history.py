"""Lineage history, as plain dicts (served under /api/v1/namespaces/... and printed by
`python -m consumer lineage versions|diff|field-history`):

- a job's versions (what it read, wrote and derived, stored once per distinct content), each with
  its first and last run, how many runs ran it, and whether it is the current one;
- what changed between two versions of a job, named by hash (or a unique prefix of one) or by an
  instant (the version current then: `version_current_at`);
- for a dataset: per field, the version changes of the jobs writing it that added, removed or
  changed a column-lineage edge into that field, and when (the first run of the new version).

The diff itself is consumer.store.version_diff (the changes topic publishes the same one)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, and_, func, select

from consumer.query.db import as_json, check_page, iso, parse_instant, reading
from consumer.query.errors import BadParameter, NotFound
from consumer.query.lineage_store import resolve_dataset
from consumer.query.nodeid import NodeId, parse_node_id
from consumer.store import schema as s
from consumer.store.lookup import existing_dataset_id, existing_job_id
from consumer.store.version_diff import version_diff

# A version named by hash: the whole hash or a prefix at least this long (git's short hashes)
MIN_HASH_PREFIX = 7
_HEX = re.compile(r"[0-9a-f]+")


def version_current_at(conn: Connection, job_id: int, instant: datetime) -> int | None:
    """The id of the version of job `job_id` current at `instant`: among its runs with a version
    created by then, the latest (by created_at, then run id) of those finished by then, else the
    latest of them all; with no such run, its declared version (newest JobEvent) if declared by
    then; else None (the job did nothing yet). At `instant` = now this is jobs.current_version_id."""
    runs = s.runs

    def latest(*finished: Any) -> int | None:
        query = (
            select(runs.c.job_version_id)
            .where(runs.c.job_id == job_id, runs.c.job_version_id.is_not(None), runs.c.created_at <= instant, *finished)
            .order_by(runs.c.created_at.desc(), runs.c.uuid.desc())
            .limit(1)
        )
        return conn.execute(query).scalar()

    found = latest(runs.c.ended_at.is_not(None), runs.c.ended_at <= instant)
    if found is None:
        found = latest()
    if found is None:
        found = conn.execute(
            select(s.jobs.c.declared_version_id).where(s.jobs.c.id == job_id, s.jobs.c.declared_at <= instant)
        ).scalar()
    return found


# ---------------------------------------------------------------- versions


def job_versions(store: Any, namespace: str, job: str, limit: int = 100, offset: int = 0) -> dict:
    """The job's versions, oldest first (by first run; a declared version never run by its declaration time)."""
    check_page(limit, offset)
    with reading(store) as conn:
        job_id = existing_job_id(conn, namespace, job)
        current, declared = conn.execute(
            select(s.jobs.c.current_version_id, s.jobs.c.declared_version_id).where(s.jobs.c.id == job_id)
        ).one()
        rows = _version_rows(conn, job_id, current, declared)
    listed = [_version_summary(row, current, declared) for row in rows]
    return {
        "job": {"namespace": namespace, "name": job},
        "currentVersion": next((v["version"] for v in listed if v["current"]), None),
        "totalCount": len(listed),
        "versions": listed[offset : offset + limit],
    }


def _version_rows(conn: Connection, job_id: int, current: int | None, declared: int | None) -> list[Any]:
    """(id, hash, created_at, first run, last run, runs) of every version a run ran or the job
    declared or answers on, oldest first. A version nothing points to any more (a run's version
    before the rest of its events arrived) is left out."""
    jv, runs = s.job_versions, s.runs
    query = (
        select(
            jv.c.id,
            jv.c.lineage_hash,
            jv.c.created_at,
            func.min(runs.c.created_at),
            func.max(runs.c.created_at),
            func.count(runs.c.id),
        )
        .select_from(jv)
        .outerjoin(runs, runs.c.job_version_id == jv.c.id)
        .where(jv.c.job_id == job_id)
        .group_by(jv.c.id, jv.c.lineage_hash, jv.c.created_at)
    )
    pointed = {current, declared}
    rows = [row for row in conn.execute(query) if row[5] > 0 or row[0] in pointed]
    return sorted(rows, key=lambda row: (row[3] or row[2], row[1]))


def _version_summary(row: Any, current: int | None, declared: int | None) -> dict:
    version_id, lineage_hash, created_at, first_run, last_run, run_count = row
    return {
        "version": lineage_hash,
        "createdAt": iso(first_run or created_at),
        "firstRunAt": iso(first_run),
        "lastRunAt": iso(last_run),
        "runCount": run_count,
        "current": version_id == current,
        "declared": version_id == declared,
    }


# ---------------------------------------------------------------- diff


def job_version_diff(store: Any, namespace: str, job: str, from_version: str, to_version: str) -> dict:
    """What changed in the job's lineage from one version to another. Each side is a version hash
    (or a unique prefix of at least MIN_HASH_PREFIX characters) or an ISO-8601 instant (the version
    current then; none before the job's first run or declaration: everything is then added)."""
    with reading(store) as conn:
        job_id = existing_job_id(conn, namespace, job)
        before = _version_named(conn, job_id, from_version, "from")
        after = _version_named(conn, job_id, to_version, "to")
        contents = _contents(conn, [v for v in (before, after) if v is not None])
    return {
        "job": {"namespace": namespace, "name": job},
        "from": _side(from_version, before, contents),
        "to": _side(to_version, after, contents),
        "diff": version_diff(contents.get(before) if before else None, contents.get(after) if after else None),
    }


def _side(requested: str, version_id: int | None, contents: Mapping[int, Any]) -> dict:
    return {"requested": requested, "version": None if version_id is None else contents[version_id]["hash"]}


def _contents(conn: Connection, version_ids: Sequence[int]) -> dict[int, Any]:
    """Each version's content, with its hash under "hash"."""
    rows = conn.execute(
        select(s.job_versions.c.id, s.job_versions.c.lineage_hash, s.job_versions.c.content).where(
            s.job_versions.c.id.in_(sorted(set(version_ids)))
        )
    )
    return {row[0]: {**as_json(row[2]), "hash": row[1]} for row in rows}


def _version_named(conn: Connection, job_id: int, text: str, name: str) -> int | None:
    """The version `text` names (a hash, a unique hash prefix or an instant), as a job_versions id;
    None: an instant at which the job did nothing yet."""
    value = text.strip().lower()
    if MIN_HASH_PREFIX <= len(value) <= 64 and _HEX.fullmatch(value):
        matches = conn.execute(
            select(s.job_versions.c.id)
            .where(s.job_versions.c.job_id == job_id, s.job_versions.c.lineage_hash.startswith(value, autoescape=True))
            .limit(2)
        ).all()
        if len(matches) > 1:
            raise BadParameter(f"{name}={text!r} is the start of several versions' hashes: give more of it")
        if matches:
            return int(matches[0][0])
    try:
        instant = parse_instant(text, name)
    except BadParameter:
        if _HEX.fullmatch(value):
            raise NotFound(f"the job has no version {text!r}") from None
        raise BadParameter(
            f"{name}={text!r} is neither a version hash (at least {MIN_HASH_PREFIX} characters) nor an ISO-8601 instant"
        ) from None
    assert instant is not None  # noqa: S101 - parse_instant returns None only for None
    try:
        instant = instant.astimezone(timezone.utc)
    except OverflowError:
        raise BadParameter(f"{name}={text!r} is out of the range of instants") from None
    return version_current_at(conn, job_id, instant)


# ---------------------------------------------------------------- field history


def field_history(store: Any, namespace: str, dataset: str) -> dict:
    """Per field of the dataset (None: the dataset-level inputs), the version changes of the jobs
    writing it that added, removed or changed a column-lineage edge into it, oldest first; each
    at the first run of the new version."""
    with reading(store) as conn:
        dataset_id = existing_dataset_id(conn, namespace, dataset)
        writers = _writers(conn, dataset_id)
        timelines = {job: _timeline(conn, job) for job in writers}
        contents = _contents(conn, sorted({version for timeline in timelines.values() for version, _ in timeline}))
    target = (namespace, dataset)
    by_field: dict[str | None, list[dict]] = defaultdict(list)
    for job_id, timeline in timelines.items():
        previous: Mapping[str, Any] | None = None
        for version_id, since in timeline:
            content = contents[version_id]
            into = version_diff(_edges_into(previous, target), _edges_into(content, target))["edges"]
            for field, change in _per_field(into).items():
                by_field[field].append(
                    {
                        "job": {"namespace": writers[job_id][0], "name": writers[job_id][1]},
                        "at": iso(since),
                        "fromVersion": None if previous is None else previous["hash"],
                        "toVersion": content["hash"],
                        **change,
                    }
                )
            previous = content
    return {
        "dataset": {"namespace": namespace, "name": dataset},
        "fields": [
            {
                "field": field,
                "changes": sorted(by_field[field], key=lambda c: (c["at"] or "", c["job"]["namespace"], c["job"]["name"])),
            }
            for field in sorted(by_field, key=lambda f: (f is not None, f or ""))
        ],
    }


def _writers(conn: Connection, dataset_id: int) -> dict[int, tuple[str, str]]:
    """The jobs that write the dataset now or wrote it in a run (job id -> (namespace, name))."""
    now = select(s.job_io.c.job_id).where(s.job_io.c.dataset_id == dataset_id, s.job_io.c.direction == "output")
    by_snapshot = select(s.snapshot_lineage.c.job_id).where(
        s.snapshot_lineage.c.dataset_id == dataset_id, s.snapshot_lineage.c.direction == "output"
    )
    by_version = (
        select(s.runs.c.job_id)
        .join(s.dataset_versions, and_(s.dataset_versions.c.run_id == s.runs.c.id, s.dataset_versions.c.dataset_id == dataset_id))
        .where(s.dataset_versions.c.dataset_id == dataset_id)
    )
    by_edge = select(s.column_lineage.c.job_id).where(s.column_lineage.c.output_dataset_id == dataset_id)
    job_ids = now.union(by_snapshot, by_version, by_edge).subquery()
    rows = conn.execute(
        select(s.jobs.c.id, s.namespaces.c.name, s.jobs.c.name)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(s.jobs.c.id.in_(select(job_ids.c[0])))
    )
    return {row[0]: (row[1], row[2]) for row in rows}


def _timeline(conn: Connection, job_id: int) -> list[tuple[int, datetime]]:
    """The job's versions in the order its runs ran them, each from the first run of its stretch
    (a version run again after another one starts a new stretch); a job never run: its declared
    version from its declaration."""
    runs = s.runs
    rows = conn.execute(
        select(runs.c.job_version_id, runs.c.created_at)
        .where(runs.c.job_id == job_id, runs.c.job_version_id.is_not(None))
        .order_by(runs.c.created_at, runs.c.uuid)
    ).all()
    timeline: list[tuple[int, datetime]] = []
    for version_id, created_at in rows:
        if not timeline or timeline[-1][0] != version_id:
            timeline.append((version_id, created_at))
    if not timeline:
        declared = conn.execute(select(s.jobs.c.declared_version_id, s.jobs.c.declared_at).where(s.jobs.c.id == job_id)).one()
        if declared[0] is not None:
            timeline.append((declared[0], declared[1]))
    return timeline


def _edges_into(content: Mapping[str, Any] | None, dataset: tuple[str, str]) -> dict[str, Any]:
    """A content holding only the column-lineage edges into `dataset`."""
    edges = [] if content is None else [e for e in content["edges"] if (e[0], e[1]) == dataset]
    return {"inputs": [], "outputs": [], "schemas": [], "edges": edges}


def _per_field(edges: Mapping[str, list[dict]]) -> dict[str | None, dict[str, list[dict]]]:
    """An edges diff split by the output field it leads into."""
    split: dict[str | None, dict[str, list[dict]]] = {}
    for kind in ("added", "removed", "changed"):
        for edge in edges[kind]:
            field = edge["output"]["field"]
            split.setdefault(field, {"added": [], "removed": [], "changed": []})[kind].append(edge)
    return split


def resolve_job(conn: Connection, text: str) -> tuple[str, str]:
    """(namespace, name) of a job given as `job:NS:NAME`, `NS:NAME`, or an unambiguous name."""
    node_text = text if text.startswith("job:") else f"job:{text}" if ":" in text else None
    node = _job_node(node_text) if node_text is not None else None
    if node is not None:
        found = conn.execute(
            select(s.namespaces.c.name, s.jobs.c.name)
            .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
            .where(s.namespaces.c.name == node.namespace, s.jobs.c.name == node.name)
        ).first()
        if found is not None:
            return found[0], found[1]
    by_name = conn.execute(
        select(s.namespaces.c.name, s.jobs.c.name)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(s.jobs.c.name == text)
    ).all()
    if len(by_name) == 1:
        return by_name[0][0], by_name[0][1]
    if len(by_name) > 1:
        raise BadParameter(f"job {text!r} is in several namespaces; give it as NAMESPACE:NAME")
    raise NotFound(f"job {text!r} not found")


def _job_node(text: str) -> NodeId | None:
    try:
        return parse_node_id(text)
    except BadParameter:  # not NAMESPACE:NAME: maybe a name with a colon
        return None


def job_named(store: Any, text: str) -> tuple[str, str]:
    """(namespace, name) of the job `text` names (see resolve_job)."""
    with reading(store) as conn:
        return resolve_job(conn, text)


def dataset_named(store: Any, table: str) -> tuple[str, str]:
    """(namespace, name) of the dataset `table` names (consumer.query.lineage_store.resolve_dataset)."""
    with reading(store) as conn:
        row_id = resolve_dataset(conn, table)
        found = conn.execute(
            select(s.namespaces.c.name, s.datasets.c.name)
            .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
            .where(s.datasets.c.id == row_id)
        ).one()
    return found[0], found[1]
