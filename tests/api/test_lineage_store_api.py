"""The lineage-store routes over HTTP: answers, DOT/SVG, and 400/404 mapping."""

from __future__ import annotations

import xml.etree.ElementTree as ET

BASE = "/api/v1/lineage-store"


def test_routes_answer_the_questions(client):
    columns = client.get(f"{BASE}/columns", params={"table": "file:/lake/gold", "column": "total", "directOnly": "true"}).json()
    assert {e["transformation"]["subtype"] for e in columns["edges"]} == {"AGGREGATION", "TRANSFORMATION", "IDENTITY"}
    snapshots = client.get(
        f"{BASE}/snapshots", params={"table": "file:/lake/src", "snapshot": "src-2", "direction": "downstream"}
    ).json()
    assert sorted(x["to"]["snapshot"] for x in snapshots["steps"]) == ["b2", "g2", "s2"]
    aligned = client.get(f"{BASE}/aligned-start", params=[("table", "file:/lake/bronze"), ("table", "file:/lake/silver")]).json()
    assert [x["snapshot"] for x in aligned["snapshots"]] == ["b2", "s2"]
    dot = client.get(f"{BASE}/graph.dot", params={"nodeId": "datasetField:file:/lake/gold:total"})
    assert dot.status_code == 200 and "AGGREGATION" in dot.text and dot.text.startswith("digraph")
    svg = client.get(f"{BASE}/graph.svg", params={"nodeId": "job:spark:etl.publish", "depth": 2})
    assert ET.fromstring(svg.text).tag.endswith("svg") and "etl.publish" in svg.text


def test_unknown_things_are_404_and_bad_parameters_400(client):
    assert client.get(f"{BASE}/tables", params={"table": "file:/nope"}).status_code == 404
    assert client.get(f"{BASE}/columns", params={"table": "file:/lake/gold", "column": "nope"}).status_code == 404
    assert client.get(f"{BASE}/snapshots", params={"table": "file:/lake/gold", "snapshot": "g9"}).status_code == 404
    assert client.get(f"{BASE}/tables", params={"table": "file:/lake/gold", "direction": "sideways"}).status_code == 400
    assert client.get(f"{BASE}/tables", params={"table": "file:/lake/gold", "depth": 101}).status_code == 400
    bad = client.get(f"{BASE}/graph.svg", params={"nodeId": "nonsense"})
    assert bad.status_code == 400 and "nonsense" in bad.json()["message"]
