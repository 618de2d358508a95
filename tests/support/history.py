"""A year of hourly runs of a few jobs, whose lineage changes twice, and a daily job that stopped:
the history retention prunes (tests/consumer/test_retention.py, benchmarks/retention.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from tests.support.events import BASE_TIME, Source, batch_write, run_event, table, transformation, with_column_lineage

YEAR_HOURS = 365 * 24
END = BASE_TIME + timedelta(hours=YEAR_HOURS)
STAGE, REPORT, STOPPED = "app.hourly.stage", "app.hourly.report", "app.daily.stopped"


def run_id(job: int, number: int) -> str:
    return f"00000000-0000-4000-{8000 + job:04d}-{number:012d}"


def stage(hour: int) -> list[dict[str, Any]]:
    """The stage job's run of `hour`: raw.events -> stage.events; a column added on day 200, the
    edge of `amount` retyped on day 350 (inside the retention)."""
    columns = ["id", "amount"] + (["country"] if hour >= 200 * 24 else [])
    source = table("raw", "events", ["id", "amount", "country"], snapshot=f"raw-{hour}")
    subtype = "TRANSFORMATION" if hour >= 350 * 24 else "IDENTITY"
    lineage: dict[str, list[Source]] = {column: [(source, column)] for column in columns}
    lineage["amount"] = [(source, "amount", transformation("DIRECT", subtype))]
    output = with_column_lineage(table("stage", "events", columns, snapshot=f"stage-{hour}"), lineage)
    at = BASE_TIME + timedelta(hours=hour)
    return [run_event("COMPLETE", STAGE, [source], [output], run_id=run_id(1, hour), at=at)]


def report(hour: int) -> list[dict[str, Any]]:
    """The report job's run of `hour`, half an hour later: stage.events (that hour's snapshot) -> mart.report."""
    source = table("stage", "events", ["id", "amount"], snapshot=f"stage-{hour}")
    output = with_column_lineage(table("mart", "report", ["total"], snapshot=f"report-{hour}"), {"total": [(source, "amount")]})
    at = BASE_TIME + timedelta(hours=hour, minutes=30)
    return [run_event("COMPLETE", REPORT, [source], [output], run_id=run_id(2, hour), at=at)]


def stopped(day: int, *, finished: bool = True, columns: tuple[str, ...] = ("id",)) -> list[dict[str, Any]]:
    """A daily job that stopped before the horizon: its last run (day 320) never finished, with
    other lineage than its last finished one (day 300), which stays its current version."""
    source = table("raw", "customers", ["id", "name"], snapshot=f"customers-{day}")
    output = table("mart", "customers", list(columns), snapshot=f"customers-{day}")
    events = batch_write(STOPPED, [source], output, run_id=run_id(3, day), start=BASE_TIME + timedelta(days=day))
    return events if finished else events[:1]


def year_of_events() -> Iterator[dict[str, Any]]:
    for hour in range(YEAR_HOURS):
        yield from stage(hour)
        yield from report(hour)
        if hour % 24 == 0 and hour // 24 <= 300:
            yield from stopped(hour // 24)
    yield from stopped(320, finished=False, columns=("id", "name"))
