"""The lineage-history routes on SQLite and PostgreSQL: a job's versions, the diff between two of them
(by hash or instant) and a dataset's field history, as documented in the OpenAPI document; unknown
jobs, datasets and versions answer 404, malformed parameters 400."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from tests.consumer import history_scenario as sc
from tests.consumer.helpers import write_events

JOB_PATH = f"/api/v1/namespaces/{sc.NAMESPACE}/jobs/{sc.JOB}/lineage-versions"
FIELD_HISTORY = f"/api/v1/namespaces/file/datasets/{quote(sc.ENRICHED['name'], safe='')}/field-history"


@pytest.fixture
def client(store) -> Iterator[TestClient]:
    for events in sc.every_day():
        write_events(store, events)
    with TestClient(create_app(store), raise_server_exceptions=False) as test_client:
        yield test_client


def _hashes(client: TestClient) -> list[str]:
    return [v["version"] for v in client.get(JOB_PATH).json()["versions"]]


def test_versions_and_diffs(client: TestClient) -> None:
    answer = client.get(JOB_PATH)
    assert answer.status_code == 200
    body = answer.json()
    assert [(v["runCount"], v["current"]) for v in body["versions"]] == [(2, False), (2, False), (1, True)]
    assert set(body["versions"][0]) == {"version", "createdAt", "firstRunAt", "lastRunAt", "runCount", "current", "declared"}
    v1, v2, v3 = _hashes(client)

    diff = client.get(f"{JOB_PATH}/diff", params={"from": v2, "to": v3}).json()
    assert (diff["from"]["version"], diff["to"]["version"]) == (v2, v3)
    [changed] = diff["diff"]["edges"]["changed"]
    assert changed["from"]["subtype"] == "IDENTITY" and changed["to"]["subtype"] == "TRANSFORMATION"
    assert [d["name"] for d in diff["diff"]["inputs"]["added"]] == [sc.REGIONS["name"]]

    by_instant = client.get(f"{JOB_PATH}/diff", params={"from": "2026-01-01T12:00:00Z", "to": v2[:10]}).json()
    assert (by_instant["from"]["version"], by_instant["to"]["version"]) == (v1, v2)
    assert [f["field"] for f in by_instant["diff"]["fields"]["added"]] == ["name"]


def test_field_history(client: TestClient) -> None:
    answer = client.get(FIELD_HISTORY)
    assert answer.status_code == 200
    fields = {entry["field"]: entry["changes"] for entry in answer.json()["fields"]}
    assert [c["at"] for c in fields["name"]] == ["2026-01-03T00:00:00Z", "2026-01-05T00:00:00Z"]
    assert fields["name"][1]["removed"][0]["input"]["dataset"] == sc.CUSTOMERS["name"]
    assert fields["name"][0]["fromVersion"] is not None and fields["id"][0]["fromVersion"] is None


@pytest.mark.parametrize(
    ("path", "params"),
    [
        (f"/api/v1/namespaces/{sc.NAMESPACE}/jobs/no.such.job/lineage-versions", {}),
        (f"/api/v1/namespaces/nowhere/jobs/{sc.JOB}/lineage-versions", {}),
        (f"{JOB_PATH}/diff", {"from": "0" * 64, "to": "2026-01-02T00:00:00Z"}),
        (f"{JOB_PATH}/diff", {"from": "abcdef0123", "to": "2026-01-02T00:00:00Z"}),
        ("/api/v1/namespaces/file/datasets/nothing/field-history", {}),
    ],
)
def test_unknown_jobs_versions_and_datasets_answer_404(client: TestClient, path: str, params: dict[str, str]) -> None:
    answer = client.get(path, params=params)
    assert answer.status_code == 404, answer.text
    assert answer.json()["code"] == 404


@pytest.mark.parametrize(
    "params",
    [
        {"to": "2026-01-02T00:00:00Z"},
        {"from": "yesterday", "to": "2026-01-02T00:00:00Z"},
        {"from": "", "to": "2026-01-02T00:00:00Z"},
        {"from": "2026-01-02T00:00:00Z", "to": "0001-01-01T00:00:00+05:00"},
    ],
)
def test_bad_parameters_answer_400(client: TestClient, params: dict[str, str]) -> None:
    answer = client.get(f"{JOB_PATH}/diff", params=params)
    assert answer.status_code == 400, answer.text
    assert client.get(JOB_PATH, params={"limit": -1}).status_code == 400


def test_the_routes_are_in_the_openapi_document_with_their_answers(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    for path in (
        "/api/v1/namespaces/{namespace}/jobs/{job}/lineage-versions",
        "/api/v1/namespaces/{namespace}/jobs/{job}/lineage-versions/diff",
        "/api/v1/namespaces/{namespace}/datasets/{dataset}/field-history",
    ):
        answers = document["paths"][path]["get"]["responses"]
        assert "$ref" in answers["200"]["content"]["application/json"]["schema"]
        assert {"400", "404"} <= set(answers)
    diff_schema = document["components"]["schemas"]["JobVersionDiff"]
    assert set(diff_schema["required"]) == {"job", "from", "to", "diff"}
