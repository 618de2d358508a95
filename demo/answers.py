"""The lineage questions the demo asks the consumer's API, rendered as plain-text tables."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx

from demo.report import format_table

INGEST_QUIET_SECONDS = 3.0
INGEST_TIMEOUT_SECONDS = 120.0


def get(api_url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{api_url}{path}", params=params, timeout=30)
    response.raise_for_status()
    return response.json()


def wait_for_ingestion(api_url: str, expected_events: int) -> int:
    """Wait until the consumer has stored `expected_events` raw events (or they stop arriving)."""
    deadline = time.monotonic() + INGEST_TIMEOUT_SECONDS
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = get(api_url, "/api/v1/events/lineage", limit=1, after="1970-01-01T00:00:00Z")["totalCount"]
        if count >= expected_events:
            return count
        if count != seen:
            seen, quiet_since = count, time.monotonic()
        elif count > 0 and time.monotonic() - quiet_since > INGEST_QUIET_SECONDS * 10:
            return count
        time.sleep(0.5)
    return max(seen, 0)


def _dataset_label(dataset: dict[str, Any]) -> str:
    identifiers = (dataset.get("facets") or {}).get("symlinks", {}).get("identifiers") or []
    if identifiers:
        return identifiers[0]["name"]
    return dataset["name"].rstrip("/").rsplit("/", 1)[-1]


def _all_datasets(api_url: str) -> list[dict[str, Any]]:
    datasets: list[dict[str, Any]] = []
    for namespace in get(api_url, "/api/v1/namespaces")["namespaces"]:
        path = f"/api/v1/namespaces/{quote(namespace['name'], safe='')}/datasets"
        datasets += get(api_url, path, limit=1000)["datasets"]
    return datasets


def column_lineage_table(api_url: str) -> str:
    """Every output column's inputs, from the column-lineage store (Marquez's dataset `columnLineage`)."""
    datasets = _all_datasets(api_url)
    labels = {(d["namespace"], d["name"]): _dataset_label(d) for d in datasets}
    rows = []
    for dataset in sorted(datasets, key=_dataset_label):
        for column in dataset.get("columnLineage") or []:
            for source in column.get("inputFields", []):
                source_label = labels.get((source["namespace"], source["dataset"]), source["dataset"])
                for transformation in source.get("transformations") or []:
                    rows.append(
                        (
                            f"{_dataset_label(dataset)}.{column['name']}",
                            "<-",
                            f"{source_label}.{source['field']}",
                            f"{transformation['type']}/{transformation['subtype']}",
                            transformation.get("description") or "",
                        )
                    )
    return format_table(("output column", "", "input column", "type/subtype", "expression"), rows)


def _node_label(node: dict[str, Any] | None) -> str:
    if not node:
        return "-"
    return node.get("name", "").rstrip("/").rsplit("/", 1)[-1] if "/" in node.get("name", "") else node.get("name", "")


def upstream_tables(api_url: str, table: str) -> str:
    answer = get(api_url, "/api/v1/lineage-store/tables", table=table, direction="upstream", depth=20)
    rows = [
        (str(e["depth"]), _node_label(e.get("from")), "->", _job_label(e["job"]), "->", _node_label(e.get("to")))
        for e in answer["edges"]
    ]
    return format_table(("depth", "input table", "", "job", "", "output table"), rows)


def _job_label(job: Any) -> str:
    return job.get("name", str(job)) if isinstance(job, dict) else str(job)


def column_origins(api_url: str, table: str, column: str) -> str:
    answer = get(api_url, "/api/v1/lineage-store/columns", table=table, column=column, direction="upstream", depth=20)
    rows = [
        (
            str(e["depth"]),
            _field_label(e["to"]),
            "<-",
            _field_label(e["from"]),
            f"{e['transformation']['type']}/{e['transformation']['subtype']}",
            e["transformation"].get("description") or "",
        )
        for e in answer["edges"]
    ]
    return format_table(("depth", "column", "", "comes from", "type/subtype", "expression"), rows)


def _field_label(field: dict[str, Any]) -> str:
    dataset = field.get("dataset") or field.get("name") or ""
    label = dataset.rstrip("/").rsplit("/", 1)[-1]
    return f"{label}.{field.get('field', '')}"


def _latest_snapshot(api_url: str, table: str) -> tuple[dict[str, Any], str]:
    """The dataset behind a table name and the newest snapshot id the stores hold for it."""
    answer = get(api_url, "/api/v1/lineage-store/tables", table=table, direction="upstream", depth=0)
    dataset = answer["table"]
    path = f"/api/v1/namespaces/{quote(dataset['namespace'], safe='')}/datasets/{quote(dataset['name'], safe='')}/versions"
    versions = get(api_url, path, limit=1)["versions"]
    if not versions:
        raise LookupError(f"no snapshot of {table} was recorded")
    return dataset, versions[0]["version"]


def snapshot_origins(api_url: str, table: str) -> str:
    _, snapshot = _latest_snapshot(api_url, table)
    answer = get(api_url, "/api/v1/lineage-store/snapshots", table=table, snapshot=snapshot, direction="upstream", depth=10)
    rows = [
        (
            str(step["depth"]),
            f"{_node_label(step['to'])}@{_short(step['to'].get('snapshot'))}",
            "<-",
            f"{_node_label(step['from'])}@{_short(step['from'].get('snapshot'))}",
            _job_label(step["job"]),
            str(step.get("batchId", "")),
        )
        for step in answer["steps"]
    ]
    return format_table(("depth", "snapshot", "", "derived from", "job", "batch"), rows)


def correction_plan(api_url: str, table: str) -> str:
    _, snapshot = _latest_snapshot(api_url, table)
    plan = get(api_url, "/api/v1/lineage-store/correction-plan", table=table, snapshot=snapshot)
    tables = [
        (_node_label(t), ", ".join(_short(s) for s in t.get("derivedSnapshots", [])), _short(t.get("rollBackTo")))
        for t in plan["tables"]
    ]
    jobs = [(_job_label(j), str(j.get("restartFromBatch", ""))) for j in plan["jobs"]]
    return "\n\n".join(
        [
            f"bad snapshot: {_short(snapshot)} of {table}",
            format_table(("downstream table", "snapshots derived from the bad one", "roll back to"), tables),
            format_table(("job", "restart from batch"), jobs),
        ]
    )


def _short(snapshot: Any) -> str:
    text = "" if snapshot is None else str(snapshot)
    return text[:12] if len(text) > 12 else text
