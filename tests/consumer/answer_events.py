"""The events the answer-comparison tests write: this project's demo events, Marquez's demo
events, the OpenLineage samples that validate, and a daily job run three times with the same
lineage. Deterministic (fixed run ids and times), so answers can be compared across releases."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from consumer.ingest.validate import InvalidEvent, validate
from tests.support.events import BASE_TIME, batch_write, table


def answer_events(fixtures: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (fixtures / "demo_events.jsonl").read_text().splitlines() if line.strip()]
    events += _listed(json.loads((fixtures / "external" / "marquez" / "metadata.json").read_text()))
    for day in range(3):
        events += batch_write(
            "app.daily",
            [table("raw", "a", ["id", "x"], snapshot=f"a{day}")],
            table("mart", "b", ["id", "x"], snapshot=f"b{day}"),
            run_id=f"00000000-0000-0000-0000-00000000000{day}",
            start=BASE_TIME + timedelta(days=day),
        )
    for path in sorted((fixtures / "external" / "openlineage-samples").glob("*.json")):
        for event in _listed(json.loads(path.read_text())):
            try:
                validate(event)
            except InvalidEvent:
                continue
            events.append(event)
    return events


def _listed(loaded: Any) -> list[dict[str, Any]]:
    return loaded if isinstance(loaded, list) else [loaded]
