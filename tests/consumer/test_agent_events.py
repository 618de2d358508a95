"""Events of the OpenLineage Spark agent (the JVM listener io.openlineage:openlineage-spark that many
Spark users already run), exactly as the agent wrote them on real Spark 4.3 and 3.5
(tests/fixtures/openlineage_agent, recorded by tests/fixtures/record_agent_events.py), taken by the
consumer as they are: posted to a served app's ingestion route one event per request with the write
token, as the agent's HTTP transport sends them, and read from a Kafka topic, one record per event, as
its Kafka transport sends them; into SQLite and PostgreSQL. The API then answers what the events say:
the jobs and datasets the agent named, linked (table lineage); for each output column, the input
fields its columnLineage facets list (column lineage); every run in the state its events gave it;
and, for the Iceberg tables, which snapshot each run read and wrote (data lineage).

What the agent's events do not carry, and so is not answered:
- data lineage of parquet files and of parquet catalog tables: the agent sends the `version` facet
  for Iceberg (and Delta) tables only, so no run of the other programs says which data it read or
  wrote: they read no dataset version, and have no snapshot steps; the versions of their outputs
  are named by their schemas, so a run writing the schema an earlier run wrote (the INSERT after
  the CREATE TABLE) makes no version of its own;
- the failure of a program: the agent ends the application's own run COMPLETE whatever its jobs did
  (OpenLineage issue #4183), so `checked_orders` is COMPLETED; its failed job's run is FAILED: the
  agent sends FAIL, then COMPLETE when the SQL execution ends, and a failure is never undone by a
  later COMPLETE (consumer.store.rows.TERMINAL_RANK);
- the end of the RDD job Spark starts to list the parquet files it reads
  (`click_durations.map_partitions_parallel_collection`): the agent sends its START only, so that
  run stays RUNNING.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from kafka import KafkaProducer

from consumer.api import create_app
from consumer.ingest.validate import parse_time
from tests.consumer.helpers import ingest_all, write_events
from tests.support.broker import unique_topic
from tests.support.paths import PROJECT_ROOT
from tests.support.server import serving
from tests.support.spec import assert_valid_event

AGENT_FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "openlineage_agent"
RECORDINGS = sorted(AGENT_FIXTURES.glob("spark-*.jsonl"))
NAMESPACE = "spark_agent"
WRITE_TOKEN = "9f3b6c1e7a2d4085b1c6"
JSON_BODY = {"Content-Type": "application/json"}

WAREHOUSE = "/tmp/openlineage-agent-fixture/warehouse"
FILES = "/tmp/openlineage-agent-fixture/files"
LAKE = "/tmp/openlineage-agent-fixture/lake/sales"
# What the programs did, under the names the agent gave their writes: job -> (read, written).
PROGRAM_WRITES = {
    "customer_totals.execute_create_data_source_table_as_select_command.default_customer_totals": (
        {f"{WAREHOUSE}/customers", f"{WAREHOUSE}/orders"},
        {f"{WAREHOUSE}/customer_totals"},
    ),
    "large_orders.execute_insert_into_hadoop_fs_relation_command.warehouse_large_orders": (
        {f"{WAREHOUSE}/orders"},
        {f"{WAREHOUSE}/large_orders"},
    ),
    "click_durations.execute_insert_into_hadoop_fs_relation_command.files_clicks": ({f"{FILES}/raw_events"}, {f"{FILES}/clicks"}),
    "checked_orders.execute_insert_into_hadoop_fs_relation_command.files_checked_orders": (
        {f"{WAREHOUSE}/orders"},
        {f"{FILES}/checked_orders"},
    ),
}
FAILING_JOB = "checked_orders.execute_insert_into_hadoop_fs_relation_command.files_checked_orders"
# Columns the programs computed: output (dataset, column) <- one of its inputs (dataset, column).
PROGRAM_COLUMNS = {
    (f"{WAREHOUSE}/customer_totals", "total_amount"): (f"{WAREHOUSE}/orders", "amount"),
    (f"{WAREHOUSE}/large_orders", "amount_cents"): (f"{WAREHOUSE}/orders", "amount"),
    (f"{FILES}/clicks", "duration_s"): (f"{FILES}/raw_events", "duration_ms"),
    (f"{FILES}/checked_orders", "amount"): (f"{WAREHOUSE}/orders", "amount"),
}
ICEBERG_TOTALS_JOB = "order_snapshots.append_data.lake_sales_payment_totals"

Dataset = tuple[str, str]  # (namespace, name)
Field = tuple[str, str, str]  # (namespace, dataset, field)


def _lines(recording: Path) -> list[bytes]:
    return [line for line in recording.read_bytes().splitlines() if line.strip()]


def _events(recording: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(recording)]


# What the events say ------------------------------------------------------------------------
def _job_datasets(events: list[dict[str, Any]]) -> dict[str, tuple[set[Dataset], set[Dataset]]]:
    """job -> (datasets read, datasets written), as every event of the job named them."""
    named: dict[str, tuple[set[Dataset], set[Dataset]]] = defaultdict(lambda: (set(), set()))
    for event in events:
        read, written = named[event["job"]["name"]]
        read.update((d["namespace"], d["name"]) for d in event["inputs"])
        written.update((d["namespace"], d["name"]) for d in event["outputs"])
    return dict(named)


def _column_inputs(events: list[dict[str, Any]]) -> dict[Field, dict[Field, set[tuple[str, str]]]]:
    """output field -> its input fields -> their (type, subtype), as the columnLineage facets list them."""
    inputs: dict[Field, dict[Field, set[tuple[str, str]]]] = defaultdict(lambda: defaultdict(set))
    for event in events:
        for output in event["outputs"]:
            facet = output.get("facets", {}).get("columnLineage") or {}
            for column, entry in facet.get("fields", {}).items():
                for source in entry["inputFields"]:
                    kinds = {(t["type"], t.get("subtype", "")) for t in source.get("transformations", [])}
                    inputs[(output["namespace"], output["name"], column)][
                        (source["namespace"], source["name"], source["field"])
                    ] |= kinds
    return inputs


def _dataset_level_inputs(events: list[dict[str, Any]]) -> dict[Dataset, set[tuple[Field, str, str]]]:
    """output dataset -> the inputs its columnLineage facets list for the dataset as a whole (JOIN, FILTER ...)."""
    inputs: dict[Dataset, set[tuple[Field, str, str]]] = defaultdict(set)
    for event in events:
        for output in event["outputs"]:
            facet = output.get("facets", {}).get("columnLineage") or {}
            for source in facet.get("dataset") or ():
                for t in source["transformations"]:
                    field = (source["namespace"], source["name"], source["field"])
                    inputs[(output["namespace"], output["name"])].add((field, t["type"], t["subtype"]))
    return inputs


def _expected_states(events: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """run id -> (job, state): a FAIL makes a run FAILED whatever follows, else its COMPLETE makes it
    COMPLETED; a run with START/RUNNING only is RUNNING."""
    types: dict[str, set[str]] = defaultdict(set)
    jobs = {}
    for event in events:
        types[event["run"]["runId"]].add(event["eventType"])
        jobs[event["run"]["runId"]] = event["job"]["name"]
    outcomes = (("FAIL", "FAILED"), ("ABORT", "ABORTED"), ("COMPLETE", "COMPLETED"))
    return {run: (jobs[run], next((state for kind, state in outcomes if kind in seen), "RUNNING")) for run, seen in types.items()}


def _versions(datasets: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(namespace, name, version) of the datasets whose `version` facet names the data."""
    return {
        (d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"])
        for d in datasets
        if "version" in d.get("facets", {})
    }


def _versioned_runs(events: list[dict[str, Any]]) -> dict[str, tuple[str, set, set]]:
    """run id -> (job, versions read, versions written), from its COMPLETE event's `version` facets."""
    return {
        e["run"]["runId"]: (e["job"]["name"], _versions(e["inputs"]), _versions(e["outputs"]))
        for e in events
        if e["eventType"] == "COMPLETE" and _versions(e["outputs"])
    }


# What the API answers -------------------------------------------------------------------------
def _get(client: httpx.Client, path: str, **params: Any) -> Any:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, f"{path} {params}: {answer.status_code} {answer.text[:500]}"
    return answer.json()


def _segment(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _check_answers(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    assert _get(client, "/api/v1/events/lineage", limit=1)["totalCount"] == len(events)
    _check_jobs_and_runs(client, events)
    _check_table_lineage(client, events)
    _check_column_lineage(client, events)
    _check_data_lineage(client, events)


def _check_jobs_and_runs(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    expected = _expected_states(events)
    listed = _get(client, f"/api/v1/namespaces/{NAMESPACE}/jobs", limit=1000)
    assert {job["name"] for job in listed["jobs"]} == {job for job, _ in expected.values()} >= set(PROGRAM_WRITES)
    for job in {job for job, _ in expected.values()}:
        runs = _get(client, f"/api/v1/namespaces/{NAMESPACE}/jobs/{_segment(job)}/runs", limit=100)["runs"]
        assert {run["id"]: run["state"] for run in runs} == {r: state for r, (j, state) in expected.items() if j == job}, job
    # the failing program: its job's run FAILED (the agent sent FAIL, then COMPLETE), with the agent's error
    assert {job for job, state in expected.values() if state == "FAILED"} == {FAILING_JOB}
    failed = _get(client, "/api/v1/jobs", lastRunStates="FAILED")["jobs"]
    assert [(job["name"], job["latestRun"]["state"]) for job in failed] == [(FAILING_JOB, "FAILED")]
    facets = _get(client, f"/api/v1/jobs/runs/{failed[0]['latestRun']['id']}/facets")["facets"]
    assert "order over limit" in facets["spark.exception"]["message"]
    # the application's own run: the agent reports it COMPLETE (not carried: the program's failure)
    [application] = _get(client, f"/api/v1/namespaces/{NAMESPACE}/jobs/checked_orders/runs")["runs"]
    assert application["state"] == "COMPLETED"


def _node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}:{name}"


def _check_table_lineage(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    named = _job_datasets(events)
    for job, (read, written) in named.items():
        job_id = _node_id("job", NAMESPACE, job)
        graph = _get(client, "/api/v1/lineage", nodeId=job_id, depth=1)["graph"]
        [node] = [node for node in graph if node["id"] == job_id]
        assert {edge["origin"] for edge in node["inEdges"]} == {_node_id("dataset", *d) for d in read}, job
        assert {edge["destination"] for edge in node["outEdges"]} == {_node_id("dataset", *d) for d in written}, job
    for job, (read, written) in PROGRAM_WRITES.items():
        assert ({name for _, name in named[job][0]}, {name for _, name in named[job][1]}) == (read, written)
    # two hops up from the CTAS's table: the tables it joined and the jobs that wrote them
    totals = _node_id("dataset", "file", f"{WAREHOUSE}/customer_totals")
    upstream = {node["id"] for node in _get(client, "/api/v1/lineage", nodeId=totals, depth=2)["graph"]}
    writers = {job for job, (_, written) in named.items() if ("file", f"{WAREHOUSE}/orders") in written}
    assert _node_id("dataset", "file", f"{WAREHOUSE}/customers") in upstream and writers
    assert {_node_id("job", NAMESPACE, job) for job in writers} <= upstream


def _check_column_lineage(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    inputs = _column_inputs(events)
    for (namespace, dataset, column), sources in inputs.items():
        node_id = f"datasetField:{namespace}:{dataset}:{column}"
        graph = _get(client, "/api/v1/column-lineage", nodeId=node_id, depth=1)["graph"]
        [node] = [node for node in graph if node["id"] == node_id]
        answered = {
            (f["namespace"], f["dataset"], f["field"]): {(t["type"], t["subtype"]) for t in f["transformations"]}
            for f in node["data"]["inputFields"]
        }
        assert answered == sources, node_id
    for (dataset, column), (source, source_column) in PROGRAM_COLUMNS.items():
        assert ("file", source, source_column) in inputs[("file", dataset, column)], (dataset, column)
    # what shapes a table as a whole (the agent's dataset-level JOIN, FILTER, GROUP_BY inputs)
    for (namespace, dataset), expected in _dataset_level_inputs(events).items():
        column = next(field for (ns, name, field) in inputs if (ns, name) == (namespace, dataset))
        answer = _get(
            client, "/api/v1/lineage-store/columns", table=f"{namespace}:{dataset}", column=column, direction="upstream", depth=1
        )
        answered = {
            (
                (i["from"]["namespace"], i["from"]["dataset"], i["from"]["field"]),
                i["transformation"]["type"],
                i["transformation"]["subtype"],
            )
            for i in answer["tableLevelInputs"]
        }
        assert answered == expected, dataset
    filtered = _dataset_level_inputs(events)[("file", f"{WAREHOUSE}/large_orders")]
    assert (("file", f"{WAREHOUSE}/orders", "amount"), "INDIRECT", "FILTER") in filtered


def _version_id(version: dict[str, Any]) -> tuple[str, str, str]:
    named = version["datasetVersionId"]
    return named["namespace"], named["name"], named["version"]


def _check_data_lineage(client: httpx.Client, events: list[dict[str, Any]]) -> None:
    versioned = _versioned_runs(events)
    for run_id, (job, read, written) in versioned.items():
        run = _get(client, f"/api/v1/jobs/runs/{run_id}")
        as_read = {_version_id(v) for v in run["inputDatasetVersions"]}
        as_written = {_version_id(v) for v in run["outputDatasetVersions"]}
        assert (as_read, as_written) == (read, written), job
        for namespace, name, snapshot in written if read else ():
            steps = _get(
                client,
                "/api/v1/lineage-store/snapshots",
                table=f"{namespace}:{name}",
                snapshot=snapshot,
                direction="upstream",
                depth=1,
            )["steps"]
            assert {(s["runId"], s["from"]["namespace"], s["from"]["name"], s["from"]["snapshot"]) for s in steps} == {
                (run_id, *version) for version in read
            }, job
    if any(job.startswith("order_snapshots.") for job, *_ in _expected_states(events).values()):
        # Iceberg: each run of the totals read the snapshot the append before it made, a new one each time
        totals = [read for job, read, _ in versioned.values() if job == ICEBERG_TOTALS_JOB]
        assert len(totals) == 2 and all(len(read) == 1 for read in totals) and totals[0] != totals[1]
    # parquet tables and files: no `version` facet, so no run names the data it read
    for job in PROGRAM_WRITES:
        assert not any(_versions(e["inputs"] + e["outputs"]) for e in events if e["job"]["name"] == job)
        [run] = _get(client, f"/api/v1/namespaces/{NAMESPACE}/jobs/{_segment(job)}/runs")["runs"]
        assert run["inputDatasetVersions"] == [], job
    # a version named by its schema (docs/store.md): the run that first wrote that schema made it
    versions = _get(client, f"/api/v1/namespaces/file/datasets/{_segment(f'{WAREHOUSE}/customer_totals')}/versions")["versions"]
    writers = {
        r
        for r, (job, _) in _expected_states(events).items()
        if ("file", f"{WAREHOUSE}/customer_totals") in _job_datasets(events)[job][1]
    }
    assert versions and {version["createdByRun"]["id"] for version in versions} <= writers


# The tests ------------------------------------------------------------------------------------
def test_the_recordings_are_the_agents_own_valid_events_as_their_readme_says():
    readme = (AGENT_FIXTURES / "README.md").read_text()
    assert [path.name for path in RECORDINGS] == ["spark-3.5.jsonl", "spark-4.3.jsonl"]
    for recording in RECORDINGS:
        events = _events(recording)
        engines = {json.dumps(e["run"]["facets"]["processing_engine"], sort_keys=True) for e in events}
        [engine] = [json.loads(text) for text in engines]
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{recording.name}`"))
        assert f" {engine['openlineageAdapterVersion']} " in row and f"PySpark {engine['version']} " in row, row
        assert {e["producer"] for e in events} == {
            f"https://github.com/OpenLineage/OpenLineage/tree/{engine['openlineageAdapterVersion']}/integration/spark"
        }
        for event in events:
            assert_valid_event(event)
        assert not re.search(rb"/(?:root|home|work)/", recording.read_bytes())  # no path of the recording machine but /tmp


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.stem)
def test_agent_events_posted_over_http_are_all_stored_and_answered(store, recording):
    lines = _lines(recording)
    app = create_app(store, SimpleNamespace(api_token=WRITE_TOKEN))
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        without_token = client.post("/api/v1/lineage", content=lines[0], headers=JSON_BODY)
        posted = [
            client.post("/api/v1/lineage", content=line, headers={**JSON_BODY, "Authorization": f"Bearer {WRITE_TOKEN}"})
            for line in lines
        ]
        assert without_token.status_code == 401
        assert [answer.status_code for answer in posted] == [201] * len(lines), [a.text for a in posted if a.status_code != 201]
        _check_answers(client, _events(recording))


@pytest.mark.kafka
@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.stem)
def test_agent_events_from_kafka_are_all_stored_and_answered(store, kafka_bootstrap, recording):
    lines = _lines(recording)
    topic = unique_topic("agent-events", kafka_bootstrap)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for line in lines:
        producer.send(topic, value=line)
    producer.flush()
    producer.close()

    ingestor = ingest_all(store, kafka_bootstrap, topic, len(lines))

    assert (ingestor.stats.records, ingestor.stats.stored, ingestor.stats.dead_lettered) == (len(lines), len(lines), 0)
    with TestClient(create_app(store)) as client:
        _check_answers(client, _events(recording))


@pytest.mark.parametrize("complete_first", [False, True], ids=["fail-then-complete", "complete-then-fail"])
def test_the_failed_run_stays_failed_whichever_of_its_end_events_is_stored_first(store, complete_first):
    """The agent's FAIL and COMPLETE of one run, each in a transaction of its own, in either order."""
    events = _events(next(path for path in RECORDINGS if path.stem == "spark-4.3"))
    [failed_run] = [run for run, (job, _) in _expected_states(events).items() if job == FAILING_JOB]
    ends = [e for e in events if e["run"]["runId"] == failed_run and e["eventType"] in ("FAIL", "COMPLETE")]
    assert [e["eventType"] for e in ends] == ["FAIL", "COMPLETE"] and ends[0]["eventTime"] < ends[1]["eventTime"]
    for event in reversed(ends) if complete_first else ends:
        write_events(store, [event])
    with TestClient(create_app(store)) as client:
        run = _get(client, f"/api/v1/jobs/runs/{failed_run}")
    assert run["state"] == "FAILED"
    assert parse_time(run["endedAt"], "endedAt") == parse_time(ends[1]["eventTime"], "eventTime")  # the latest end event
