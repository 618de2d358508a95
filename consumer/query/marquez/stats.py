"""Marquez's `/stats/*`: lineage events per interval and the running count of jobs, datasets and sources."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func, select

from consumer.query.db import iso, reading
from consumer.query.errors import BadParameter
from consumer.store import schema as s

_STATE_OF_EVENT = {"START": "start", "COMPLETE": "complete", "FAIL": "fail", "ABORT": "abort"}


def _intervals(period: str, zone_name: str, now: datetime) -> list[tuple[datetime, datetime]]:
    """The 24 hours (DAY) or 7 days (WEEK) in `zone_name` up to and including the one holding `now`."""
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise BadParameter(f"unknown timezone {zone_name!r}") from error
    now = now.astimezone(zone)
    if period == "DAY":
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        step, count = timedelta(hours=1), 24
    else:
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        step, count = timedelta(days=1), 7
    return [(end - step * (count - i), end - step * (count - i - 1)) for i in range(count)]


def lineage_event_stats(store: Any, period: str, zone_name: str, now: datetime) -> list[dict]:
    intervals = _intervals(period, zone_name, now)
    with reading(store) as conn:
        rows = conn.execute(
            select(s.lineage_events.c.event_time, s.lineage_events.c.event_type).where(
                s.lineage_events.c.event_time >= intervals[0][0]
            )
        ).all()
    counts = [dict.fromkeys(("fail", "start", "complete", "abort"), 0) for _ in intervals]
    for moment, event_type in rows:
        index = _bucket(intervals, moment)
        if index is not None and event_type in _STATE_OF_EVENT:
            counts[index][_STATE_OF_EVENT[event_type]] += 1
    return [{"startInterval": iso(a), "endInterval": iso(b), **count} for (a, b), count in zip(intervals, counts, strict=True)]


def entity_stats(store: Any, entity: str, period: str, zone_name: str, now: datetime) -> list[dict]:
    """Running count of jobs / datasets / sources that existed at the end of each interval."""
    intervals = _intervals(period, zone_name, now)
    with reading(store) as conn:
        if entity == "jobs":
            created = conn.execute(select(s.jobs.c.created_at)).scalars().all()
        elif entity == "datasets":
            created = conn.execute(select(s.datasets.c.created_at)).scalars().all()
        else:
            created = (
                conn.execute(
                    select(func.min(s.datasets.c.created_at)).group_by(
                        func.coalesce(s.datasets.c.source_name, s.datasets.c.namespace_id)
                    )
                )
                .scalars()
                .all()
            )
    moments = sorted(created)
    return [{"startInterval": iso(a), "endInterval": iso(b), "count": sum(1 for m in moments if m < b)} for a, b in intervals]


def _bucket(intervals: Sequence[tuple[datetime, datetime]], moment: datetime) -> int | None:
    for index, (start, end) in enumerate(intervals):
        if start <= moment < end:
            return index
    return None
