"""A workload of real Spark events in which every run is of a job the store has never seen.

`first_seen_jobs(path, count)` reads the runs of a file of events the emitter wrote (e.g.
`python -m benchmarks.tpcds run`'s `events.jsonl`: one START and one COMPLETE per CTAS, about
15-30 KB each) and yields `count` events: the runs again and again, each copy under a job name
and output tables of its own, a run id of its own and later times, so that each copy is a new
job writing a new table from the same inputs, as a team adding pipelines does.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


def first_seen_jobs(path: Path, count: int) -> Iterator[dict[str, Any]]:
    runs = _runs(path)
    if not runs:
        raise SystemExit(f"{path} holds no run with a START and an end event of a job that writes a table")
    produced = 0
    for round_number in range(count):
        for run in runs:
            for event in _copied(run, round_number):
                if produced == count:
                    return
                produced += 1
                yield event


def _runs(path: Path) -> list[list[dict[str, Any]]]:
    """Each run that writes a table, its events in order (the first START and end event seen)."""
    by_run: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if not event.get("outputs") or event.get("eventType") not in ("START", "COMPLETE", "FAIL"):
            continue
        key = (event["run"]["runId"], event["job"]["name"])
        kind = "start" if event["eventType"] == "START" else "end"
        by_run.setdefault(key, {}).setdefault(kind, event)
    return [[events["start"], events["end"]] for events in by_run.values() if len(events) == 2]


def _copied(run: list[dict[str, Any]], round_number: int) -> list[dict[str, Any]]:
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run[0]['run']['runId']}/{round_number}"))
    copies = []
    for event in run:
        event = copy.deepcopy(event)
        event["run"]["runId"] = run_id
        event["job"]["name"] = f"{event['job']['name']}_{round_number}"
        for output in event["outputs"]:
            output["name"] = f"{output['name']}_{round_number}"
            for identifier in output.get("facets", {}).get("symlinks", {}).get("identifiers", []):
                identifier["name"] = f"{identifier['name']}_{round_number}"
        event["eventTime"] = _later(event["eventTime"], round_number)
        copies.append(event)
    return copies


def _later(event_time: str, round_number: int) -> str:
    moved = datetime.fromisoformat(event_time.replace("Z", "+00:00")) + timedelta(hours=round_number)
    return moved.isoformat()
