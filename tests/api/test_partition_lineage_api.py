"""The partition routes over HTTP on real SQLite and PostgreSQL stores: answers, the OpenAPI document, 400/404."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.consumer.helpers import write_events
from tests.query.daily_pipeline import CLEANED, DAILY, RAW, REPORT, events, run_uuid

BASE = "/api/v1/lineage-store"


@pytest.fixture
def client(store):
    write_events(store, events())
    with TestClient(create_app(store), raise_server_exceptions=False) as test_client:
        yield test_client


def test_partition_routes_answer_which_partitions_derive_from_a_bad_one(client):
    lineage = client.get(
        f"{BASE}/partitions", params={"table": f"file:{RAW}", "partition": "dt=2024-01-01", "direction": "downstream"}
    )
    assert lineage.status_code == 200
    assert [(p["name"], p["partition"]) for p in lineage.json()["partitions"]] == [
        (CLEANED, "dt=2024-01-01"),
        (DAILY, "dt=2024-01-01"),
        (REPORT, None),
    ]
    plan = client.get(f"{BASE}/partition-correction-plan", params={"table": "lake.raw", "partition": "dt=2024-01-01"}).json()
    assert plan["badPartition"] == "dt=2024-01-01"
    assert {(j["name"], b["batchId"], b["runId"]) for j in plan["jobs"] for b in j["batches"]} == {
        (job, 1, run_uuid(job, 1)) for job in ("etl.clean", "etl.aggregate", "etl.report")
    }


def test_partition_routes_are_documented(client):
    paths = client.get("/openapi.json").json()["paths"]
    for route in ("partitions", "partition-correction-plan"):
        operation = paths[f"{BASE}/{route}"]["get"]
        assert {"table", "partition"} <= {p["name"] for p in operation["parameters"]}
        assert {"200", "400", "404"} <= set(operation["responses"])


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"table": f"file:{RAW}", "partition": "dt=2024-01-09"}, 404),
        ({"table": "file:/lake/nope", "partition": "dt=2024-01-01"}, 404),
        ({"table": f"file:{RAW}", "partition": "not a partition"}, 400),
        ({"table": f"file:{RAW}", "partition": "dt=2024-01-01", "depth": 101}, 400),
        ({"table": f"file:{RAW}"}, 400),
    ],
)
def test_unknown_partitions_are_404_and_bad_parameters_400(client, params, status):
    for route in ("partitions", "partition-correction-plan"):
        answer = client.get(f"{BASE}/{route}", params=params)
        assert answer.status_code == status and answer.json()["code"] == status
