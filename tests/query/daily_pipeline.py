"""A daily-partitioned pipeline as OpenLineage events (what our emitter sends: input snapshots carry the
partitions read, output snapshots the partitions written), built with the shared event factory:

    raw --etl.clean--> cleaned --etl.aggregate--> daily --etl.report--> report (unpartitioned)
                                 countries (unpartitioned) --^

Every job runs once per day k = 1..3 (its batch k), reading and writing only partition dt=DAYS[k-1];
`etl.backfill` (one run, after them) reads two days of cleaned into daily.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from tests.support.events import BASE_TIME, batch_write, table

RAW, CLEANED, DAILY, REPORT, COUNTRIES = "/lake/raw", "/lake/cleaned", "/lake/daily", "/lake/report", "/lake/countries"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
JOBS = ("etl.clean", "etl.aggregate", "etl.report")


def lake(location: str, snapshot: str, partitions: list[dict[str, str]] | None) -> dict[str, Any]:
    return table("lake", location.rsplit("/", 1)[1], ["id", "dt"], snapshot=snapshot, partitions=partitions, location=location)


def run_uuid(job: str, day: int) -> str:
    return str(uuid.UUID(int=(JOBS.index(job) + 1) * 100 + day))


def _day(day: int) -> list[dict[str, Any]]:
    dt = [{"dt": DAYS[day - 1]}]
    start = BASE_TIME + timedelta(days=day)
    steps = [
        ("etl.clean", [lake(RAW, f"raw-{day}", dt)], lake(CLEANED, f"cleaned-{day}", dt)),
        # the dimension table is read whole: its snapshot facet has no partitions
        (
            "etl.aggregate",
            [lake(CLEANED, f"cleaned-{day}", dt), lake(COUNTRIES, "countries-1", None)],
            lake(DAILY, f"daily-{day}", dt),
        ),
        ("etl.report", [lake(DAILY, f"daily-{day}", dt)], lake(REPORT, f"report-{day}", [])),
    ]
    produced: list[dict[str, Any]] = []
    for step, (job, inputs, output) in enumerate(steps):
        produced += batch_write(job, inputs, output, run_id=run_uuid(job, day), start=start + timedelta(hours=step))
    return produced


def events() -> list[dict[str, Any]]:
    backfill = batch_write(
        "etl.backfill",
        [lake(CLEANED, "cleaned-3", [{"dt": DAYS[1]}, {"dt": DAYS[2]}])],
        lake(DAILY, "daily-4", [{"dt": DAYS[1]}, {"dt": DAYS[2]}]),
        run_id=str(uuid.UUID(int=999)),
        start=BASE_TIME + timedelta(days=5),
    )
    return [event for day in (1, 2, 3) for event in _day(day)] + backfill
