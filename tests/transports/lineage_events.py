"""OpenLineage events shaped like the emitter's: an application run and child runs pointing at it."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from typing import Any

from openlineage.client import event_v2
from openlineage.client.facet_v2 import parent_run

PRODUCER = "https://github.com/spark-lineage/spark-lineage/tests"
NAMESPACE = "spark-tests"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def application_events(app_name: str, actions: int) -> list[event_v2.RunEvent]:
    """Application START, then START/COMPLETE of `actions` child runs, then application COMPLETE."""
    app_run_id = str(uuid.uuid4())
    app_job = event_v2.Job(namespace=NAMESPACE, name=app_name)
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=app_run_id),
        job=parent_run.Job(namespace=NAMESPACE, name=app_name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=app_run_id), job=parent_run.RootJob(namespace=NAMESPACE, name=app_name)
        ),
    )
    events = [_event(event_v2.RunState.START, app_run_id, app_job)]
    for index in range(actions):
        child_run_id = str(uuid.uuid4())
        child_job = event_v2.Job(namespace=NAMESPACE, name=f"{app_name}.insert.table_{index}")
        for state in (event_v2.RunState.START, event_v2.RunState.COMPLETE):
            events.append(_event(state, child_run_id, child_job, {"parent": parent}))
    events.append(_event(event_v2.RunState.COMPLETE, app_run_id, app_job))
    return events


def _event(state: event_v2.RunState, run_id: str, job: event_v2.Job, facets: dict | None = None) -> event_v2.RunEvent:
    return event_v2.RunEvent(
        eventType=state,
        eventTime=_now(),
        run=event_v2.Run(runId=run_id, facets=facets or {}),
        job=job,
        producer=PRODUCER,
    )


def identity(event_json: dict[str, Any]) -> tuple[str, str]:
    """What tells two events apart: (runId, eventType)."""
    return event_json["run"]["runId"], event_json["eventType"]


def identities_of_values(values: list[bytes]) -> list[tuple[str, str]]:
    return [identity(json.loads(value)) for value in values]


EMIT_APP_TIMEOUT_SECONDS = 120


def run_emit_app(app_name: str, actions: int, env: dict[str, str], *flags: str) -> tuple[list[tuple[str, str]], str]:
    """tests/transports/emit_app.py: an application emitting `actions` actions' events; (their identities, its stderr)."""
    from tests.support.paths import PROJECT_ROOT

    completed = subprocess.run(
        [sys.executable, "-m", "tests.transports.emit_app", app_name, str(actions), *flags],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=EMIT_APP_TIMEOUT_SECONDS,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return [tuple(pair) for pair in json.loads(completed.stdout)], completed.stderr
