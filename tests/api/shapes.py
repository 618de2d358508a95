"""Response shapes from Marquez's own OpenAPI spec (tests/fixtures/external/marquez/openapi.yml), as JSON Schema.

Conversions, each because Marquez's real responses need it:
- Marquez serializes absent values as null (even `required` ones such as DatasetVersion.description), so every
  property accepts null; `required` still demands the key;
- DatasetVersion.tags is `type: string` in the spec but a list of tag names in Marquez's responses;
- facets are served as received, and other producers' facets often lack `_producer`/`_schemaURL`;
- `GraphNode.data` is a oneOf of two schemas that both accept any object; Marquez Web picks by the node `type`,
  so `graph_node_errors` does the same (DATASET -> Dataset, JOB -> Job, DATASET_FIELD -> what the UI reads);
- routes the spec lacks (`GET /jobs`, `/stats/*`) get the shapes Marquez Web reads (`web/src/store/requests`).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

EXTRA_SCHEMAS: dict[str, Any] = {
    "JobListAll": {
        "type": "object",
        "required": ["jobs", "totalCount"],
        "properties": {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "totalCount": {"type": "integer"},
        },
    },
    "LineageMetrics": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["startInterval", "endInterval", "fail", "start", "complete", "abort"],
            "properties": {
                "startInterval": {"type": "string"},
                "endInterval": {"type": "string"},
                **{k: {"type": "integer"} for k in ("fail", "start", "complete", "abort")},
            },
        },
    },
    "IntervalMetrics": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["startInterval", "endInterval", "count"],
            "properties": {"startInterval": {"type": "string"}, "endInterval": {"type": "string"}, "count": {"type": "integer"}},
        },
    },
    # what marquez-web's column-lineage graph reads from a DATASET_FIELD node's data
    "ColumnLineageNodeData": {
        "type": "object",
        "required": ["namespace", "dataset", "field", "inputFields"],
        "properties": {
            "type": {"enum": ["DATASET_FIELD"]},
            "namespace": {"type": "string"},
            "dataset": {"type": "string"},
            "field": {"type": "string"},
            "fieldType": {"type": ["string", "null"]},
            "inputFields": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["namespace", "dataset", "field", "transformations"],
                    "properties": {
                        "namespace": {"type": "string"},
                        "dataset": {"type": "string"},
                        "field": {"type": "string"},
                        "transformations": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "object", "required": ["type", "subtype", "description", "masking"]},
                        },
                    },
                },
            },
        },
    },
    "Error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
    },
}


def _nullable_optionals(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_nullable_optionals(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _nullable_optionals(value) for key, value in schema.items() if key not in ("example", "discriminator")}
    if converted.get("type") is None and "type" in converted:
        del converted["type"]  # the spec has a few bare `type:` keys
    properties = converted.get("properties")
    if isinstance(properties, dict):
        converted["properties"] = {name: {"anyOf": [prop, {"type": "null"}]} for name, prop in properties.items()}
    return converted


@lru_cache(maxsize=1)
def _components(spec_path: str) -> dict[str, Any]:
    spec = yaml.safe_load(Path(spec_path).read_text())
    schemas = _nullable_optionals(copy.deepcopy(spec["components"]["schemas"]))
    # facets are served as received; producers other than ours often omit _producer/_schemaURL
    schemas["BaseFacet"].pop("required", None)
    schemas["DatasetVersion"]["properties"]["tags"] = {"type": "array", "items": {"type": "string"}}
    # checked per node by graph_node_errors, by the node's type (the oneOf alone matches both schemas)
    schemas["GraphNode"]["properties"]["data"] = {"type": "object"}
    schemas.update(EXTRA_SCHEMAS)
    return {"components": {"schemas": schemas}}


def shape_errors(spec_path: Path, schema_name: str, body: Any) -> list[str]:
    root = {**_components(str(spec_path)), "$ref": f"#/components/schemas/{schema_name}"}
    validator = Draft202012Validator(root)
    errors = [f"{schema_name} {'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in validator.iter_errors(body)]
    if schema_name == "LineageGraph" and isinstance(body, dict):
        for node in body.get("graph", []):
            errors += graph_node_errors(spec_path, node)
    return errors


def graph_node_errors(spec_path: Path, node: dict) -> list[str]:
    data_schema = {"DATASET": "Dataset", "JOB": "Job", "DATASET_FIELD": "ColumnLineageNodeData"}.get(node.get("type"))
    if data_schema is None:
        return [f"node {node.get('id')}: unknown type {node.get('type')!r}"]
    edges_ok = all(isinstance(e, dict) and set(e) == {"origin", "destination"} for e in node["inEdges"] + node["outEdges"])
    errors = [] if edges_ok else [f"node {node['id']}: malformed edges"]
    return errors + shape_errors(spec_path, data_schema, node["data"])
