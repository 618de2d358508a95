"""What runs confirmed of their job's stored state (runs.job_state = jobs.state_hash).

A batch whose every event of a job belongs to a run that asserted exactly the job's stored state
leaves the job's row as it is (consumer.store.writer): such runs hold the times the row would have
taken, read with `schema.job_seen_at` and `schema.confirmed_until`. Before a job's row is written
again and before runs are deleted, those times are written into the row (`confirm`,
`settle_confirmed`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from consumer.store.rows import stamp
from consumer.store.schema import chunks, confirmed_until, jobs


def confirm(job: dict[str, Any], at: datetime) -> None:
    """Merge into a stored job row (a dict of its columns) what runs that asserted its whole
    stored state confirmed up to `at`: each key's clock and the job's last times at least `at`
    (every key of the row is a key such a run asserted)."""
    stamped = stamp(at)
    if job["merged_at"] is not None:
        job["merged_at"] = {key: max(clock, stamped) for key, clock in job["merged_at"].items()}
    job["updated_at"], job["last_seen"] = max(job["updated_at"], at), max(job["last_seen"], at)


def confirmed_times(connection: Connection, job_id_list: Sequence[int]) -> dict[int, datetime]:
    """Per job, the latest time a run asserted its stored state, where one did."""
    found: dict[int, datetime] = {}
    for chunk in chunks(sorted(job_id_list)):
        query = select(jobs.c.id, confirmed_until(jobs.c.id, jobs.c.state_hash)).where(
            jobs.c.id.in_(chunk), jobs.c.state_hash.is_not(None)
        )
        found.update((job_id, at) for job_id, at in connection.execute(query) if at is not None)
    return found


def settle_confirmed(connection: Connection, job_id_list: Sequence[int] | None = None) -> int:
    """Write into the jobs' rows (default: every job's) what their runs confirmed; rows changed."""
    if job_id_list is None:
        job_id_list = list(connection.execute(select(jobs.c.id).where(jobs.c.state_hash.is_not(None))).scalars())
    columns = (jobs.c.id, jobs.c.merged_at, jobs.c.updated_at, jobs.c.last_seen)
    confirmed = confirmed_until(jobs.c.id, jobs.c.state_hash).label("confirmed")
    changed = []
    for chunk in chunks(sorted(job_id_list)):
        query = select(*columns, confirmed).where(jobs.c.id.in_(chunk), jobs.c.state_hash.is_not(None))
        for row in connection.execute(query).mappings():
            if row["confirmed"] is None:
                continue
            stored = {column.name: row[column.name] for column in columns}
            job = dict(stored)
            confirm(job, row["confirmed"])
            if job != stored:
                changed.append(
                    {"job": job["id"], "clocks": job["merged_at"], "updated": job["updated_at"], "seen": job["last_seen"]}
                )
    if changed:
        statement = (
            update(jobs)
            .where(jobs.c.id == bindparam("job"))
            .values(merged_at=bindparam("clocks"), updated_at=bindparam("updated"), last_seen=bindparam("seen"))
        )
        connection.execute(statement, changed)
    return len(changed)
