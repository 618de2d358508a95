"""A real uvicorn server on a loopback port, read by the marquez-python client (unchanged) and plain HTTP."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest
from marquez_client import MarquezClient

from consumer.api import create_app
from tests.support.server import serving

TOKEN = "5e8a0b3c9d1f4e27"


@pytest.fixture
def server_url(filled_store):
    with serving(create_app(filled_store, SimpleNamespace(api_token=TOKEN))) as url:
        yield url


def test_marquez_python_client_reads_everything(server_url):
    client = MarquezClient(url=server_url)
    assert "food_delivery" in [n["name"] for n in client.list_namespaces()["namespaces"]]
    assert client.get_namespace("food_delivery")["name"] == "food_delivery"
    jobs = client.list_jobs("spark")["jobs"]
    assert [j["name"] for j in jobs] == ["etl.ingest", "etl.publish", "etl.refine"]
    assert client.get_job("spark", "etl.refine")["outputs"] == [{"namespace": "file", "name": "/lake/silver"}]
    runs = client.list_job_runs("spark", "etl.refine")["runs"]
    assert client.get_job_run(runs[0]["id"])["state"] == "COMPLETED"
    assert "/lake/gold" in [d["name"] for d in client.list_datasets("file")["datasets"]]
    gold = client.get_dataset("file", "/lake/gold")  # sent as %2Flake%2Fgold
    assert gold["name"] == "/lake/gold" and gold["columnLineage"]
    assert [v["version"] for v in client.list_dataset_versions("file", "/lake/gold")["versions"]] == ["g2", "g1"]
    by_field = client.get_column_lineage_by_dataset_field("file", "/lake/gold", "total", depth=10)
    assert "datasetField:file:/lake/silver:amount_cents" in {n["id"] for n in by_field["graph"]}
    assert client.get_column_lineage_by_dataset("file", "/lake/silver", with_downstream=True)["graph"]
    assert client.get_column_lineage_by_job("spark", "etl.publish")["graph"]
    assert client.list_tags()["tags"] == []
    # a namespace holding host:port, as a dataset node id
    hive = client.get_dataset("hive://localhost:9083", "test.xxx")
    assert hive["namespace"] == "hive://localhost:9083"


def test_live_lineage_store_routes_svg_and_docs(server_url):
    up = httpx.get(f"{server_url}/api/v1/lineage-store/tables", params={"table": "file:/lake/gold", "direction": "upstream"})
    assert up.status_code == 200 and {t["name"] for t in up.json()["tables"]} == {
        "/lake/silver",
        "/lake/dim",
        "/lake/bronze",
        "/lake/src",
    }
    svg = httpx.get(f"{server_url}/api/v1/lineage-store/graph.svg", params={"nodeId": "dataset:file:/lake/silver"})
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml") and svg.text.startswith("<svg")
    docs = httpx.get(f"{server_url}/openapi.json").json()
    assert {"/api/v1/lineage-store/correction-plan", "/api/v1/lineage-store/aligned-start", "/api/v1/lineage"} <= set(
        docs["paths"]
    )
    assert httpx.get(f"{server_url}/docs").status_code == 200


def test_delete_endpoints_need_the_bearer_token(server_url):
    path = f"{server_url}/api/v1/lineage-store/jobs/spark/etl.refine/table-lineage"
    assert httpx.delete(path).status_code == 401
    assert httpx.delete(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    # reads stay open
    before = httpx.get(f"{server_url}/api/v1/lineage-store/tables", params={"table": "file:/lake/silver"}).json()
    assert [t["name"] for t in before["tables"]] == ["/lake/bronze", "/lake/src"]
    done = httpx.delete(path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert done.status_code == 200 and done.json()["removedRows"] > 0
    after = httpx.get(f"{server_url}/api/v1/lineage-store/tables", params={"table": "file:/lake/silver"}).json()
    assert after["tables"] == []
