"""The diff of two job-version contents (consumer.store.version_diff), on hand-written contents in
the stored shape: every kind of change listed once, nothing else."""

from __future__ import annotations

from typing import Any

from consumer.store.version_diff import is_empty, version_diff

ORDERS, CUSTOMERS, REGIONS, OUT = ["raw", "orders"], ["raw", "customers"], ["raw", "regions"], ["mart", "enriched"]


def _edge(out_field: str | None, source: list[str], in_field: str, kind: str = "DIRECT", subtype: str = "IDENTITY", description: str | None = None, masking: bool = False) -> list[Any]:  # fmt: skip
    return [*OUT, out_field, *source, in_field, kind, subtype, description, masking]


V1: dict[str, Any] = {
    "inputs": [CUSTOMERS, ORDERS],
    "outputs": [OUT],
    "schemas": [[*OUT, [["id", "long"], ["amount", "double"]]], [*ORDERS, [["id", "long"], ["amount", "double"]]]],
    "edges": [_edge("amount", ORDERS, "amount"), _edge("id", ORDERS, "id"), _edge(None, ORDERS, "id", "INDIRECT", "FILTER")],
}
V2: dict[str, Any] = {  # a column added
    **V1,
    "schemas": [[*OUT, [["id", "long"], ["amount", "double"], ["name", "string"]]], V1["schemas"][1]],
    "edges": [*V1["edges"], _edge("name", CUSTOMERS, "name")],
}
V3: dict[str, Any] = {  # amount retyped and its edge now a transformation; customers swapped for regions
    "inputs": [ORDERS, REGIONS],
    "outputs": [OUT],
    "schemas": [[*OUT, [["id", "long"], ["amount", "decimal(10,2)"], ["name", "string"]]], V1["schemas"][1]],
    "edges": [
        _edge("amount", ORDERS, "amount", "DIRECT", "TRANSFORMATION", "round(amount, 2)"),
        _edge("id", ORDERS, "id"),
        _edge(None, ORDERS, "id", "INDIRECT", "FILTER"),
        _edge("name", REGIONS, "name"),
    ],
}


def _ends(out_field: str | None, source: list[str], in_field: str) -> dict[str, Any]:
    return {
        "output": {"namespace": "mart", "dataset": "enriched", "field": out_field},
        "input": {"namespace": source[0], "dataset": source[1], "field": in_field},
    }


def _identity() -> dict[str, Any]:
    return {"type": "DIRECT", "subtype": "IDENTITY", "description": None, "masking": False}


NOTHING = {"added": [], "removed": []}


def test_a_version_against_itself_changes_nothing() -> None:
    assert is_empty(version_diff(V2, V2))
    assert version_diff(V1, V1) == {
        "inputs": NOTHING,
        "outputs": NOTHING,
        "fields": {**NOTHING, "retyped": []},
        "edges": {**NOTHING, "changed": []},
    }


def test_a_column_added() -> None:
    assert version_diff(V1, V2) == {
        "inputs": NOTHING,
        "outputs": NOTHING,
        "fields": {
            "added": [{"namespace": "mart", "dataset": "enriched", "field": "name", "type": "string"}],
            "removed": [],
            "retyped": [],
        },
        "edges": {"added": [{**_ends("name", CUSTOMERS, "name"), "transformation": _identity()}], "removed": [], "changed": []},
    }


def test_an_edge_retyped_and_an_input_swapped() -> None:
    diff = version_diff(V2, V3)
    assert diff["inputs"] == {
        "added": [{"namespace": "raw", "name": "regions"}],
        "removed": [{"namespace": "raw", "name": "customers"}],
    }
    assert diff["outputs"] == NOTHING
    assert diff["fields"] == {
        "added": [],
        "removed": [],
        "retyped": [{"namespace": "mart", "dataset": "enriched", "field": "amount", "from": "double", "to": "decimal(10,2)"}],
    }
    assert diff["edges"] == {
        "added": [{**_ends("name", REGIONS, "name"), "transformation": _identity()}],
        "removed": [{**_ends("name", CUSTOMERS, "name"), "transformation": _identity()}],
        "changed": [
            {
                **_ends("amount", ORDERS, "amount"),
                "from": _identity(),
                "to": {"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "round(amount, 2)", "masking": False},
                "changes": ["subtype", "description"],
            }
        ],
    }


def test_the_diff_backwards_is_the_mirror_image() -> None:
    forward, backward = version_diff(V1, V3), version_diff(V3, V1)
    for part in ("inputs", "outputs"):
        assert forward[part]["added"] == backward[part]["removed"] and forward[part]["removed"] == backward[part]["added"]
    assert forward["edges"]["added"] == backward["edges"]["removed"]
    assert [(c["from"], c["to"]) for c in forward["edges"]["changed"]] == [
        (c["to"], c["from"]) for c in backward["edges"]["changed"]
    ]
    assert [(f["from"], f["to"]) for f in forward["fields"]["retyped"]] == [
        (f["to"], f["from"]) for f in backward["fields"]["retyped"]
    ]


def test_from_nothing_everything_is_added_and_to_nothing_everything_removed() -> None:
    created, gone = version_diff(None, V1), version_diff(V1, None)
    assert [d["name"] for d in created["inputs"]["added"]] == ["customers", "orders"]
    assert [f["field"] for f in created["fields"]["added"]] == ["amount", "id"]  # of the output only, sorted
    assert len(created["edges"]["added"]) == len(gone["edges"]["removed"]) == 3
    assert created["edges"]["added"][0]["output"]["field"] is None  # the dataset-level FILTER input sorts first
    assert [d["name"] for d in gone["outputs"]["removed"]] == ["enriched"]


def test_masking_alone_is_a_change_of_the_same_edge() -> None:
    masked = {**V1, "edges": [_edge("amount", ORDERS, "amount", masking=True), *V1["edges"][1:]]}
    assert version_diff(V1, masked)["edges"] == {
        "added": [],
        "removed": [],
        "changed": [
            {
                **_ends("amount", ORDERS, "amount"),
                "from": _identity(),
                "to": {**_identity(), "masking": True},
                "changes": ["masking"],
            }
        ],
    }


def test_two_transformations_of_one_pair_are_matched_by_type_and_the_rest_added() -> None:
    """id <- orders.id gains an INDIRECT/JOIN beside its DIRECT/IDENTITY, which becomes a DIRECT/TRANSFORMATION."""
    after = {
        **V1,
        "edges": [
            V1["edges"][0],
            _edge("id", ORDERS, "id", "DIRECT", "TRANSFORMATION"),
            _edge("id", ORDERS, "id", "INDIRECT", "JOIN"),
            V1["edges"][2],
        ],
    }
    edges = version_diff(V1, after)["edges"]
    assert [e["transformation"]["subtype"] for e in edges["added"]] == ["JOIN"]
    assert edges["removed"] == []
    assert [(c["from"]["subtype"], c["to"]["subtype"], c["changes"]) for c in edges["changed"]] == [
        ("IDENTITY", "TRANSFORMATION", ["subtype"])
    ]
