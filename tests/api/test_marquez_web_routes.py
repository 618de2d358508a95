"""Routes Marquez serves and Marquez Web calls that Marquez's OpenAPI spec lacks or we lacked: the v2beta
search (`{hits, highlights}` as marquez-web's OpenSearchResultJobs / OpenSearchResultDatasets types read them)
and the tag writes on tags, jobs, datasets and dataset fields (behind the bearer token)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from consumer.api import create_app
from tests.support.events import BASE_TIME, run_event, table

FOOD = "food_delivery"
TOKEN = "tag-writer-7d3f9a1c2e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GOLD = f"/api/v1/namespaces/file/datasets/{quote('/lake/gold', safe='')}"
JOB = f"/api/v1/namespaces/{FOOD}/jobs/etl_delivery_7_days"
DATASET = f"/api/v1/namespaces/{FOOD}/datasets/public.delivery_7_days"

_NAME_FIELDS = {
    "run_id": {"type": ["string", "null"]},
    "name": {"type": "string"},
    "namespace": {"type": "string"},
    "eventType": {"enum": ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", None]},
    "facets": {"type": "object"},
}
# marquez-web web/src/types/api.ts: JobHit, DatasetHit and the per-hit highlight maps
OPEN_SEARCH_RESULT = {
    "JOB": {
        "type": "object",
        "required": ["hits", "highlights"],
        "additionalProperties": False,
        "properties": {
            "hits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["run_id", "name", "namespace", "eventType", "type", "runFacets"],
                    "properties": {**_NAME_FIELDS, "type": {"type": "string"}, "runFacets": {"type": "object"}},
                },
            },
            "highlights": {
                "type": "array",
                "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            },
        },
    },
    "DATASET": {
        "type": "object",
        "required": ["hits", "highlights"],
        "additionalProperties": False,
        "properties": {
            "hits": {
                "type": "array",
                "items": {"type": "object", "required": ["run_id", "name", "namespace", "eventType"], "properties": _NAME_FIELDS},
            },
            "highlights": {
                "type": "array",
                "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            },
        },
    },
}


@pytest.fixture
def guarded_client(filled_store):
    with TestClient(create_app(filled_store, SimpleNamespace(api_token=TOKEN)), raise_server_exceptions=False) as test_client:
        yield test_client


def _ok(response):
    assert response.status_code == 200, response.text
    return response.json()


def _open_search_result(kind, body):
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in Draft202012Validator(OPEN_SEARCH_RESULT[kind]).iter_errors(body)
    ]
    assert not errors, "\n".join(errors[:10])
    assert len(body["hits"]) == len(body["highlights"])
    return body


def test_v2beta_job_search_answers_hits_with_highlights(client):
    body = _open_search_result("JOB", _ok(client.get("/api/v2beta/search/jobs", params={"q": "deliv"})))
    names = [hit["name"] for hit in body["hits"]]
    assert len(names) == 2 and names == sorted(names) and all("deliv" in n.lower() for n in names)
    hit = next(h for h in body["hits"] if h["name"] == "etl_delivery_7_days")
    job = _ok(client.get(JOB))
    assert hit["namespace"] == FOOD and hit["type"] == "BATCH"
    assert hit["run_id"] == job["latestRun"]["id"] and hit["eventType"] == "COMPLETE"
    assert body["highlights"][names.index("etl_delivery_7_days")] == {"name": ["etl_<em>deliv</em>ery_7_days"]}
    wildcard = _ok(client.get("/api/v2beta/search/jobs", params={"q": "D_LIV"}))
    assert [h["name"] for h in wildcard["hits"]] == names
    assert _ok(client.get("/api/v2beta/search/jobs", params={"q": "no-such-job-anywhere"})) == {"hits": [], "highlights": []}
    assert client.get("/api/v2beta/search/jobs").status_code == 400


def test_v2beta_dataset_search_answers_hits_with_highlights(client):
    body = _open_search_result("DATASET", _ok(client.get("/api/v2beta/search/datasets", params={"q": "DELIV"})))
    assert [(h["namespace"], h["name"]) for h in body["hits"]][0] == (FOOD, "public.delivery_7_days") and len(body["hits"]) == 2
    assert body["highlights"][0] == {"name": ["public.<em>deliv</em>ery_7_days"]}
    gold = _open_search_result("DATASET", _ok(client.get("/api/v2beta/search/datasets", params={"q": "/lake/gold"})))
    [hit] = [h for h in gold["hits"] if h["name"] == "/lake/gold"]
    written_by = _ok(client.get(f"{GOLD}/versions"))["versions"][0]["createdByRun"]
    assert hit["run_id"] == written_by["id"] and hit["eventType"] == "COMPLETE"
    assert hit["facets"]["schema"]["fields"]
    limited = _ok(client.get("/api/v2beta/search/datasets", params={"q": "%", "limit": 3}))
    assert len(limited["hits"]) == 3


def test_tag_writes_need_the_bearer_token(guarded_client):
    for method, path in (
        ("PUT", "/api/v1/tags/PII"),
        ("DELETE", "/api/v1/tags/PII"),
        ("POST", f"{JOB}/tags/PII"),
        ("PUT", f"{JOB}/tags/PII"),
        ("DELETE", f"{JOB}/tags/PII"),
        ("POST", f"{DATASET}/tags/PII"),
        ("DELETE", f"{DATASET}/tags/PII"),
        ("POST", f"{GOLD}/fields/total/tags/PII"),
    ):
        assert guarded_client.request(method, path).status_code == 401, (method, path)
    assert "PII" not in _ok(guarded_client.get(JOB))["tags"]
    assert "PII" not in [t["name"] for t in _ok(guarded_client.get("/api/v1/tags"))["tags"]]


def test_job_shows_its_tags_and_loses_them_on_delete(guarded_client, check_shape):
    tag = check_shape("Tag", _ok(guarded_client.put("/api/v1/tags/PII", json={"description": "personal data"}, headers=AUTH)))
    assert tag == {"name": "PII", "description": "personal data"}
    assert {"name": "PII", "description": "personal data"} in _ok(guarded_client.get("/api/v1/tags"))["tags"]
    tagged = check_shape("Job", _ok(guarded_client.post(f"{JOB}/tags/PII", headers=AUTH)))
    assert tagged["tags"] == ["PII"]
    again = _ok(guarded_client.put(f"{JOB}/tags/PII", headers=AUTH))
    assert again["tags"] == ["PII"]
    assert _ok(guarded_client.put(f"{JOB}/tags/NIGHTLY", headers=AUTH))["tags"] == ["NIGHTLY", "PII"]
    assert "NIGHTLY" in [t["name"] for t in _ok(guarded_client.get("/api/v1/tags"))["tags"]]
    assert _ok(guarded_client.get(JOB))["tags"] == ["NIGHTLY", "PII"]
    listed = _ok(guarded_client.get(f"/api/v1/namespaces/{FOOD}/jobs", params={"limit": 1000}))["jobs"]
    assert next(j for j in listed if j["name"] == "etl_delivery_7_days")["tags"] == ["NIGHTLY", "PII"]
    untagged = check_shape("Job", _ok(guarded_client.delete(f"{JOB}/tags/PII", headers=AUTH)))
    assert untagged["tags"] == ["NIGHTLY"] and _ok(guarded_client.get(JOB))["tags"] == ["NIGHTLY"]
    assert guarded_client.post(f"/api/v1/namespaces/{FOOD}/jobs/no_such_job/tags/PII", headers=AUTH).status_code == 404


def test_dataset_and_field_show_their_tags_and_lose_them_on_delete(guarded_client, check_shape):
    tagged = check_shape("Dataset", _ok(guarded_client.post(f"{DATASET}/tags/PII", headers=AUTH)))
    assert tagged["tags"] == ["PII"] and _ok(guarded_client.get(DATASET))["tags"] == ["PII"]
    untagged = check_shape("Dataset", _ok(guarded_client.delete(f"{DATASET}/tags/PII", headers=AUTH)))
    assert untagged["tags"] == [] and _ok(guarded_client.get(DATASET))["tags"] == []

    field_tagged = check_shape("Dataset", _ok(guarded_client.post(f"{GOLD}/fields/total/tags/PII", headers=AUTH)))
    assert next(f for f in field_tagged["fields"] if f["name"] == "total")["tags"] == ["PII"]
    assert next(f for f in _ok(guarded_client.get(GOLD))["fields"] if f["name"] == "total")["tags"] == ["PII"]
    field_untagged = _ok(guarded_client.delete(f"{GOLD}/fields/total/tags/PII", headers=AUTH))
    assert next(f for f in field_untagged["fields"] if f["name"] == "total")["tags"] == []
    assert guarded_client.post(f"{GOLD}/fields/no_such_field/tags/PII", headers=AUTH).status_code == 404
    assert guarded_client.delete(f"/api/v1/namespaces/{FOOD}/datasets/no.such/tags/PII", headers=AUTH).status_code == 404


def test_deleting_a_tag_removes_it_from_everything(guarded_client, check_shape):
    for path in (f"{JOB}/tags/GONE", f"{DATASET}/tags/GONE", f"{GOLD}/fields/total/tags/GONE"):
        _ok(guarded_client.post(path, headers=AUTH))
    deleted = check_shape("Tag", _ok(guarded_client.delete("/api/v1/tags/GONE", headers=AUTH)))
    assert deleted["name"] == "GONE"
    assert "GONE" not in _ok(guarded_client.get(JOB))["tags"]
    assert "GONE" not in _ok(guarded_client.get(DATASET))["tags"]
    assert "GONE" not in next(f for f in _ok(guarded_client.get(GOLD))["fields"] if f["name"] == "total")["tags"]
    assert "GONE" not in [t["name"] for t in _ok(guarded_client.get("/api/v1/tags"))["tags"]]
    missing = guarded_client.delete("/api/v1/tags/GONE", headers=AUTH)
    assert missing.status_code == 404 and check_shape("Error", missing.json())["message"]


def test_a_field_keeps_its_tags_when_a_later_event_rewrites_its_schema(guarded_client):
    _ok(guarded_client.post(f"{GOLD}/fields/total/tags/PII", headers=AUTH))
    gold = table("lake", "gold", ["country", "total", "country_name"], location="/lake/gold")
    gold["facets"]["schema"]["fields"][1]["type"] = "decimal(38,2)"
    later = run_event("COMPLETE", "publish_again", [], [gold], run_id=str(uuid.uuid4()), at=BASE_TIME + timedelta(days=30))
    assert guarded_client.post("/api/v1/lineage", json=later, headers=AUTH).status_code == 201
    total = next(f for f in _ok(guarded_client.get(GOLD))["fields"] if f["name"] == "total")
    assert total["type"] == "decimal(38,2)" and total["tags"] == ["PII"]
