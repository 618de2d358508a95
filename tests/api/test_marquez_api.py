"""The Marquez-compatible routes: shapes from Marquez's OpenAPI spec, ordering, paging and errors."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from urllib.parse import quote

from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.api.shapes import graph_node_errors
from tests.query.pipeline import ingest
from tests.support.paths import MARQUEZ_DEMO_EVENTS

FOOD = "food_delivery"


def _get(client, path, **params):
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_namespaces_and_tags(client, check_shape):
    body = check_shape("NamespaceList", _get(client, "/api/v1/namespaces"))
    names = [n["name"] for n in body["namespaces"]]
    assert names == sorted(names) and FOOD in names and "file" in names and body["totalCount"] == len(names)
    check_shape("Namespace", _get(client, f"/api/v1/namespaces/{FOOD}"))
    check_shape("TagList", _get(client, "/api/v1/tags"))


def test_jobs_paging_and_last_run_states(client, check_shape):
    first = check_shape("JobList", _get(client, f"/api/v1/namespaces/{FOOD}/jobs", limit=5, offset=0))
    second = check_shape("JobList", _get(client, f"/api/v1/namespaces/{FOOD}/jobs", limit=5, offset=5))
    assert first["totalCount"] == second["totalCount"] >= 13  # the seed's 13 and any sample in the namespace
    names = [j["name"] for j in first["jobs"] + second["jobs"]]
    assert names == sorted(names) and len(set(names)) == 10
    every = check_shape("JobListAll", _get(client, "/api/v1/jobs", limit=1000))
    assert every["totalCount"] == len(every["jobs"]) > 13
    completed = _get(client, "/api/v1/jobs", lastRunStates="COMPLETED", limit=1000)
    assert completed["jobs"] and all(j["latestRun"]["state"] == "COMPLETED" for j in completed["jobs"])
    assert completed["totalCount"] <= every["totalCount"]
    # a page of every namespace's jobs, and of those whose last run completed, is that slice of the whole list
    page = _get(client, "/api/v1/jobs", limit=4, offset=3)
    assert [(j["namespace"], j["name"]) for j in page["jobs"]] == [(j["namespace"], j["name"]) for j in every["jobs"][3:7]]
    completed_page = _get(client, "/api/v1/jobs", lastRunStates="COMPLETED", limit=2, offset=1)
    assert completed_page["jobs"] == completed["jobs"][1:3] and completed_page["totalCount"] == completed["totalCount"]
    job = check_shape("Job", _get(client, f"/api/v1/namespaces/{FOOD}/jobs/etl_delivery_7_days"))
    assert {"namespace": FOOD, "name": "public.delivery_7_days"} in job["outputs"] and job["latestRun"]["state"] == "COMPLETED"


def test_runs_run_and_facets(client, check_shape):
    runs = check_shape("RunList", _get(client, "/api/v1/namespaces/spark/jobs/etl.ingest/runs"))["runs"]
    assert len(runs) == 3 and [r["createdAt"] for r in runs] == sorted((r["createdAt"] for r in runs), reverse=True)
    run = check_shape("Run", _get(client, f"/api/v1/jobs/runs/{runs[0]['id']}"))
    assert run["state"] == "COMPLETED" and run["durationMs"] == 300000
    assert {v["datasetVersionId"]["version"] for v in run["outputDatasetVersions"]} == {"b3"}
    facets = check_shape("FacetsResult", _get(client, f"/api/v1/jobs/runs/{runs[0]['id']}/facets", type="job"))
    assert facets["facets"]["jobType"]["integration"] == "SPARK"


def test_datasets_with_fields_column_lineage_and_versions(client, check_shape):
    listed = check_shape("DatasetList", _get(client, f"/api/v1/namespaces/{FOOD}/datasets", limit=100))
    assert [d["name"] for d in listed["datasets"]] == sorted(d["name"] for d in listed["datasets"])
    gold = check_shape("Dataset", _get(client, f"/api/v1/namespaces/file/datasets/{quote('/lake/gold', safe='')}"))
    assert [f["name"] for f in gold["fields"]] == ["country", "total", "country_name"]
    total = next(c for c in gold["columnLineage"] if c["name"] == "total")
    subtypes = {(i["field"], t["subtype"]) for i in total["inputFields"] for t in i["transformations"]}
    assert subtypes == {("amount_cents", "AGGREGATION"), ("country", "GROUP_BY")}
    versions = _get(client, f"/api/v1/namespaces/file/datasets/{quote('/lake/gold', safe='')}/versions")
    check_shape("DatasetVersionList", versions)
    assert [v["version"] for v in versions["versions"]] == ["g2", "g1"]
    assert versions["versions"][0]["createdByRun"]["state"] == "COMPLETED"


def test_table_lineage_graph(client, check_shape):
    body = check_shape("LineageGraph", _get(client, "/api/v1/lineage", nodeId=f"dataset:{FOOD}:public.delivery_7_days", depth=20))
    nodes = {n["id"]: n for n in body["graph"]}
    job = nodes[f"job:{FOOD}:etl_delivery_7_days"]
    assert job["type"] == "JOB" and job["data"]["type"] == "BATCH"
    assert {"origin": f"job:{FOOD}:etl_delivery_7_days", "destination": f"dataset:{FOOD}:public.delivery_7_days"} in job[
        "outEdges"
    ]
    assert nodes[f"dataset:{FOOD}:public.delivery_7_days"]["data"]["type"] == "DB_TABLE"
    assert f"dataset:{FOOD}:public.orders" in nodes  # transitive
    shallow = _get(client, "/api/v1/lineage", nodeId=f"dataset:{FOOD}:public.delivery_7_days", depth=0)
    assert len(shallow["graph"]) < len(body["graph"])


def test_column_lineage_graph_keeps_transformations(client):
    body = _get(client, "/api/v1/column-lineage", nodeId="datasetField:file:/lake/gold:total", depth=10, withDownstream="false")
    for node in body["graph"]:
        assert not graph_node_errors_for(client, node)
    nodes = {n["id"]: n for n in body["graph"]}
    total = nodes["datasetField:file:/lake/gold:total"]
    assert {
        "origin": "datasetField:file:/lake/gold:total",
        "destination": "datasetField:file:/lake/silver:amount_cents",
    } in total["inEdges"]
    [aggregated] = [i for i in total["data"]["inputFields"] if i["field"] == "amount_cents"]
    assert aggregated["transformations"] == [
        {"type": "DIRECT", "subtype": "AGGREGATION", "description": "sum(amount_cents)", "masking": False}
    ]
    assert "datasetField:file:/lake/src:amount" in nodes  # three steps up
    downstream = _get(
        client, "/api/v1/column-lineage", nodeId="datasetField:file:/lake/bronze:amount", depth=10, withDownstream="true"
    )
    assert "datasetField:file:/lake/gold:total" in {n["id"] for n in downstream["graph"]}


def graph_node_errors_for(client, node):
    from tests.support.paths import MARQUEZ_OPENAPI

    return graph_node_errors(MARQUEZ_OPENAPI, node)


def test_namespace_with_host_and_port_in_node_ids(client):
    body = _get(client, "/api/v1/search", q="%", limit=1000)
    uri_namespaced = [r for r in body["results"] if "://" in r["namespace"] and r["type"] == "DATASET"]
    assert uri_namespaced, "the shared samples hold datasets in scheme://host:port namespaces"
    target = uri_namespaced[0]
    graph = _get(client, "/api/v1/lineage", nodeId=target["nodeId"])
    assert target["nodeId"] in {n["id"] for n in graph["graph"]}


def test_events_window_paging_and_order(client, check_shape):
    body = check_shape("LineageEventList", _get(client, "/api/v1/events/lineage", limit=5))
    times = [e["eventTime"] for e in body["events"]]
    assert len(times) == 5 and body["totalCount"] > 5
    window = _get(
        client,
        "/api/v1/events/lineage",
        after="2026-01-01T00:00:00Z",
        before="2026-01-01T02:00:00Z",
        sortDirection="asc",
        limit=100,
    )
    assert window["totalCount"] == 6  # batch 1 of the three pipeline jobs, START and COMPLETE
    assert [e["job"]["name"] for e in window["events"]][::2] == ["etl.ingest", "etl.refine", "etl.publish"]


def test_search(client, check_shape):
    body = check_shape("SearchResultList", _get(client, "/api/v1/search", q="deliv"))
    assert body["totalCount"] == 4 and [r["name"] for r in body["results"]] == sorted(r["name"] for r in body["results"])
    datasets = _get(client, "/api/v1/search", q="DELIV", filter="dataset")
    assert {r["type"] for r in datasets["results"]} == {"DATASET"} and datasets["totalCount"] == 2
    assert datasets["results"][0]["nodeId"] == f"dataset:{FOOD}:public.delivery_7_days"


def _demo_client(store, now: datetime) -> TestClient:
    """Marquez's demo seed only (26 events, 13 jobs, 13 datasets, all between 00:00 and 00:10 UTC on
    2024-01-01), served by an app whose clock says `now`."""
    ingest(store, json.loads(MARQUEZ_DEMO_EVENTS.read_text()))
    return TestClient(create_app(store, clock=lambda: now), raise_server_exceptions=False)


def test_stats_count_the_events_and_entities_of_each_interval(store, check_shape):
    client = _demo_client(store, datetime(2024, 1, 1, 5, 30, tzinfo=timezone.utc))
    day = check_shape("LineageMetrics", _get(client, "/api/v1/stats/lineage-events", period="DAY", timezone="UTC"))
    assert [(b["startInterval"][:19], b["endInterval"][:19]) for b in (day[0], day[-1])] == [
        ("2023-12-31T06:00:00", "2023-12-31T07:00:00"),
        ("2024-01-01T05:00:00", "2024-01-01T06:00:00"),
    ]
    counts = [(b["start"], b["complete"], b["fail"], b["abort"]) for b in day]
    assert counts == [(0, 0, 0, 0)] * 18 + [(13, 13, 0, 0)] + [(0, 0, 0, 0)] * 5
    # in UTC+05:30 it is 11:00 and the events fall in the local 05:00 hour: six hours back
    kolkata = _get(client, "/api/v1/stats/lineage-events", period="DAY", timezone="Asia/Kolkata")
    assert [b["start"] for b in kolkata] == [0] * 17 + [13] + [0] * 6
    assert kolkata[17]["startInterval"].startswith("2023-12-31T23:30:00"), "intervals are written in UTC"
    jobs = check_shape("IntervalMetrics", _get(client, "/api/v1/stats/jobs", period="WEEK"))
    assert [b["count"] for b in jobs] == [0] * 6 + [13]
    datasets = check_shape("IntervalMetrics", _get(client, "/api/v1/stats/datasets", period="DAY"))
    # 13 inputs/outputs plus public.menu_item_id, which the seed's column lineage names as an input
    assert [b["count"] for b in datasets] == [0] * 18 + [14] * 6


def test_stats_window_moves_with_the_clock(store):
    client = _demo_client(store, datetime(2024, 1, 3, 12, 0, tzinfo=timezone.utc))
    day = _get(client, "/api/v1/stats/lineage-events", period="DAY", timezone="UTC")
    assert sum(b["start"] + b["complete"] for b in day) == 0, "the events are more than 24 hours old"
    assert [b["count"] for b in _get(client, "/api/v1/stats/jobs", period="WEEK")] == [0] * 4 + [13] * 3


def test_errors_are_404_and_400_with_messages_and_no_traces(client, check_shape):
    missing = client.get("/api/v1/namespaces/nope/jobs/none")
    assert missing.status_code == 404 and "none" in check_shape("Error", missing.json())["message"]
    assert client.get("/api/v1/lineage", params={"nodeId": "dataset:food_delivery:nope"}).status_code == 404
    for params in (
        {"nodeId": "table:x:y"},
        {"nodeId": "dataset:onlyone"},
        {"nodeId": f"dataset:{FOOD}:public.orders", "depth": "-1"},
        {"nodeId": f"dataset:{FOOD}:public.orders", "depth": "many"},
    ):
        response = client.get("/api/v1/lineage", params=params)
        assert response.status_code == 400, params
        assert "Traceback" not in response.text and check_shape("Error", response.json())["message"]
    assert client.get("/api/v1/jobs", params={"lastRunStates": "SLEEPING"}).status_code == 400
    assert client.get("/api/v1/jobs/runs/00000000-0000-0000-0000-000000000999").status_code == 404
