"""What changed between two job versions: a pure function of their stored contents
(`job_versions.content`, built by consumer.store.rows.lineage_content), shared by the read side
(the history and diff questions) and the write side (the `job_version_changed` change message).

The answer, JSON-ready:
- `inputs` / `outputs`: the datasets read / written, `added` and `removed`;
- `fields`: the fields of the datasets written (as the versions' schemas give them), `added`,
  `removed` and `retyped` (same dataset and name, another type);
- `edges`: column-lineage edges keyed by output dataset + field (null: a dataset-level input) and
  input dataset + field, `added`, `removed` and `changed` (the same key with another
  transformation: type, subtype, description or masking; `changes` names which).

Every list is sorted, so equal inputs give equal answers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

DatasetName = tuple[str, str]  # (namespace, name)
FieldName = tuple[str, str, str]  # (namespace, dataset, field)
# (output namespace, output dataset, output field or None, input namespace, input dataset, input field)
EdgeKey = tuple[str, str, "str | None", str, str, str]
# (type, subtype, description or None, masking)
Transformation = tuple[str, str, "str | None", bool]

EMPTY_CONTENT: Mapping[str, Any] = {"inputs": [], "outputs": [], "schemas": [], "edges": []}
TRANSFORMATION_PARTS = ("type", "subtype", "description", "masking")


def version_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """What changed from the content `before` to the content `after` (None: no version, nothing done)."""
    old, new = before or EMPTY_CONTENT, after or EMPTY_CONTENT
    return {
        "inputs": _datasets_diff(old["inputs"], new["inputs"]),
        "outputs": _datasets_diff(old["outputs"], new["outputs"]),
        "fields": _fields_diff(_output_fields(old), _output_fields(new)),
        "edges": _edges_diff(_edges(old), _edges(new)),
    }


def is_empty(diff: Mapping[str, Any]) -> bool:
    """Whether a diff lists no change at all."""
    return not any(changes for part in diff.values() for changes in part.values())


def _datasets_diff(before: Sequence[Sequence[str]], after: Sequence[Sequence[str]]) -> dict[str, list[dict[str, str]]]:
    old, new = {(ns, name) for ns, name in before}, {(ns, name) for ns, name in after}
    return {
        "added": [{"namespace": ns, "name": name} for ns, name in sorted(new - old)],
        "removed": [{"namespace": ns, "name": name} for ns, name in sorted(old - new)],
    }


def _output_fields(content: Mapping[str, Any]) -> dict[FieldName, str | None]:
    """The fields of the datasets the version writes, with their types."""
    outputs = {(ns, name) for ns, name in content["outputs"]}
    return {
        (ns, name, field[0]): field[1]
        for ns, name, fields in content.get("schemas", ())
        if (ns, name) in outputs
        for field in fields
    }


def _field_ref(key: FieldName) -> dict[str, str]:
    return {"namespace": key[0], "dataset": key[1], "field": key[2]}


def _fields_diff(
    before: Mapping[FieldName, str | None], after: Mapping[FieldName, str | None]
) -> dict[str, list[dict[str, Any]]]:
    return {
        "added": [{**_field_ref(key), "type": after[key]} for key in sorted(after.keys() - before.keys())],
        "removed": [{**_field_ref(key), "type": before[key]} for key in sorted(before.keys() - after.keys())],
        "retyped": [
            {**_field_ref(key), "from": before[key], "to": after[key]}
            for key in sorted(before.keys() & after.keys())
            if before[key] != after[key]
        ],
    }


def _edges(content: Mapping[str, Any]) -> dict[EdgeKey, set[Transformation]]:
    edges: dict[EdgeKey, set[Transformation]] = defaultdict(set)
    for out_ns, out_name, out_field, in_ns, in_name, in_field, kind, subtype, description, masking in content["edges"]:
        edges[(out_ns, out_name, out_field, in_ns, in_name, in_field)].add((kind, subtype, description, bool(masking)))
    return edges


def _edges_diff(before: Mapping[EdgeKey, set[Transformation]], after: Mapping[EdgeKey, set[Transformation]]) -> dict[str, Any]:
    added: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    for key in sorted(before.keys() | after.keys(), key=_sort_key):
        old, new = before.get(key, set()), after.get(key, set())
        pairs, gone, came = _matched(sorted(old - new, key=_sort_key), sorted(new - old, key=_sort_key))
        changed += [
            {**_edge_ends(key), "from": _transformation(a), "to": _transformation(b), "changes": _changed_parts(a, b)}
            for a, b in pairs
        ]
        removed += [{**_edge_ends(key), "transformation": _transformation(t)} for t in gone]
        added += [{**_edge_ends(key), "transformation": _transformation(t)} for t in came]
    return {"added": added, "removed": removed, "changed": changed}


def _matched(
    gone: list[Transformation], came: list[Transformation]
) -> tuple[list[tuple[Transformation, Transformation]], list[Transformation], list[Transformation]]:
    """Pairs of an edge's transformations that one change turned into another: first those keeping
    type and subtype (description or masking changed), then those keeping the type, then the
    last one left on each side; what stays unpaired was removed or added."""
    pairs: list[tuple[Transformation, Transformation]] = []
    for same in (lambda a, b: a[:2] == b[:2], lambda a, b: a[0] == b[0]):
        for old in list(gone):
            match = next((new for new in came if same(old, new)), None)
            if match is not None:
                pairs.append((old, match))
                gone.remove(old)
                came.remove(match)
    if len(gone) == 1 and len(came) == 1:
        pairs.append((gone.pop(), came.pop()))
    return pairs, gone, came


def _changed_parts(before: Transformation, after: Transformation) -> list[str]:
    return [part for part, old, new in zip(TRANSFORMATION_PARTS, before, after, strict=True) if old != new]


def _edge_ends(key: EdgeKey) -> dict[str, dict[str, str | None]]:
    return {
        "output": {"namespace": key[0], "dataset": key[1], "field": key[2]},
        "input": {"namespace": key[3], "dataset": key[4], "field": key[5]},
    }


def _transformation(value: Transformation) -> dict[str, Any]:
    return {"type": value[0], "subtype": value[1], "description": value[2], "masking": value[3]}


def _sort_key(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple("" if part is None else part for part in value)
