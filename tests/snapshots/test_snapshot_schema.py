"""One contract for the snapshot facet, `schemas/SnapshotDatasetFacet.json`: the emitter's kinds
and the facets it builds, and the consumer's validation, are all held against the schema."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openlineage.client.serde import Serde

from consumer.ingest import validate as consumer_events
from emitter import facets as emitter_facets
from emitter import snapshots
from tests.support.paths import PROJECT_ROOT
from tests.support.spec import _registry_and_core

SCHEMA = json.loads((PROJECT_ROOT / "schemas" / "1-0-0" / "SnapshotDatasetFacet.json").read_text())
BODY = SCHEMA["$defs"]["SnapshotDatasetFacet"]["allOf"][1]
FACET_REF = f"{SCHEMA['$id']}#/$defs/SnapshotDatasetFacet"
VALID = {
    "_producer": emitter_facets.PRODUCER,
    "_schemaURL": FACET_REF,
    "snapshotId": "abc",
    "kind": "content",
    "batchId": 3,
    "partitions": [{"dt": "2026-01-01", "hour": None}],
    "startOffset": {"logOffset": 0},
    "endOffset": None,
}


def _schema_accepts(facet: dict[str, Any]) -> bool:
    registry, _ = _registry_and_core()
    return Draft202012Validator({"$ref": FACET_REF}, registry=registry).is_valid(facet)


def _consumer_accepts(facet: dict[str, Any]) -> bool:
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-01-01T00:00:00+00:00",
        "producer": "https://example.com/producer",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "01930000-0000-7000-8000-000000000000"},
        "job": {"namespace": "ns", "name": "job"},
        "inputs": [{"namespace": "file", "name": "/in", "facets": {"snapshot": facet}}],
        "outputs": [],
    }
    try:
        consumer_events.validate(event)
    except consumer_events.InvalidEvent:
        return False
    return True


def test_the_kinds_are_the_schemas_on_both_sides() -> None:
    kinds = set(BODY["properties"]["kind"]["enum"])
    assert set(snapshots.SNAPSHOT_KINDS) == kinds
    assert set(consumer_events.SNAPSHOT_KINDS) == kinds


def _changed(**changes: Any) -> dict[str, Any]:
    facet = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is KeyError:
            facet.pop(key)
        else:
            facet[key] = value
    return facet


CASES = {
    "every field": _changed(),
    "the required ones only": {k: VALID[k] for k in ("_producer", "_schemaURL", "snapshotId", "kind")},
    **{f"kind {kind}": _changed(kind=kind) for kind in BODY["properties"]["kind"]["enum"]},
    "no snapshotId": _changed(snapshotId=KeyError),
    "an empty snapshotId": _changed(snapshotId=""),
    "a numeric snapshotId": _changed(snapshotId=7),
    "no kind": _changed(kind=KeyError),
    "an unknown kind": _changed(kind="guess"),
    "a negative batchId": _changed(batchId=-1),
    "a string batchId": _changed(batchId="3"),
    "a boolean batchId": _changed(batchId=True),
    "no partitions written": _changed(partitions=[]),
    "partitions not a list": _changed(partitions={"dt": "x"}),
    "a partition not an object": _changed(partitions=["dt=x"]),
    "a partition value not a string": _changed(partitions=[{"dt": 20260101}]),
    "offsets of any shape": _changed(startOffset=[1, "a"], endOffset=5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_consumer_accepts_exactly_what_the_schema_accepts(name: str) -> None:
    facet = CASES[name]
    assert _consumer_accepts(facet) == _schema_accepts(facet)


@pytest.mark.parametrize(
    "snapshot",
    [
        snapshots.Snapshot("c1", "content", partitions=({"dt": "2026-01-01", "hour": None},)),
        snapshots.Snapshot("c2", "content", partitions=()),
        snapshots.Snapshot("7", "delta"),
        snapshots.Snapshot("8744736658442914487", "iceberg"),
        snapshots.Snapshot("o1", "stream-offsets", batch_id=0, start_offset=None, end_offset={"0": 5}, has_offsets=True),
        snapshots.Snapshot("q:1", "sink-batch", batch_id=1),
    ],
)
def test_what_the_emitter_builds_the_schema_and_the_consumer_accept(snapshot: snapshots.Snapshot) -> None:
    facet = Serde.to_dict(emitter_facets.snapshot_facets(snapshot)["snapshot"])
    assert _schema_accepts(facet)
    assert _consumer_accepts(facet)
