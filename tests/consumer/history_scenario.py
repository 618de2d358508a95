"""A daily job whose lineage changes twice, for the history, diff and changes-topic tests:

- v1 (days 0 and 1): reads orders and customers, writes enriched(id, amount), every column DIRECT/IDENTITY
  from orders, a dataset-level FILTER on orders.id;
- v2 (days 2 and 3): a column added, enriched.name <- customers.name;
- v3 (day 4): amount's edge retyped to DIRECT/TRANSFORMATION with a description, and customers
  swapped for regions (enriched.name <- regions.name)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tests.support.events import BASE_TIME, WAREHOUSE, batch_write, table, transformation, with_column_lineage

JOB = "app.insert_into.enriched"
NAMESPACE = "spark"
ROUND = "round(amount, 2)"
DAYS = {"v1": (0, 1), "v2": (2, 3), "v3": (4,)}


def dataset(database: str, name: str) -> dict[str, str]:
    return {"namespace": "file", "name": f"{WAREHOUSE}/{database}.db/{name}"}


ORDERS, CUSTOMERS, REGIONS, ENRICHED = (
    dataset("raw", "orders"),
    dataset("raw", "customers"),
    dataset("raw", "regions"),
    dataset("mart", "enriched"),
)


def run_id(day: int) -> str:
    return f"00000000-0000-4000-8000-{day:012d}"


def started(day: int) -> datetime:
    return BASE_TIME + timedelta(days=day)


def day_events(day: int) -> list[dict[str, Any]]:
    """START and COMPLETE of the job's run of `day`, with the lineage of the version that day runs."""
    version = next(name for name, days in DAYS.items() if day in days)
    side = "regions" if version == "v3" else "customers"
    inputs = [table("raw", name, ["id", "amount", "name"], snapshot=f"{name}-{day}") for name in ("orders", side)]
    orders, other = inputs[0], inputs[1]
    columns = ["id", "amount"] if version == "v1" else ["id", "amount", "name"]
    amount = (orders, "amount", transformation("DIRECT", "TRANSFORMATION", ROUND)) if version == "v3" else (orders, "amount")
    lineage: dict[str, list[Any]] = {"id": [(orders, "id")], "amount": [amount]}
    if version != "v1":
        lineage["name"] = [(other, "name")]
    output = with_column_lineage(
        table("mart", "enriched", columns, snapshot=f"enriched-{day}"), lineage, indirect=[(orders, "id", "FILTER")]
    )
    return batch_write(JOB, inputs, output, run_id=run_id(day), start=started(day))


def every_day() -> list[list[dict[str, Any]]]:
    return [day_events(day) for days in DAYS.values() for day in days]
