"""Load plan fixtures (tests/fixtures/plans/*.json) and render lineage results compactly.

A fixture's `expected` maps each output column to `[[source, column, type, subtype, description, masking], ...]`
and `dataset` lists the dataset-level inputs the same way; `source` is the relation's table
name (`default.customers`) or its class name when it has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emitter.lineage import ColumnLineage, InputEdge, column_lineage, write_command
from emitter.plan import Node, parse_plan, table_identifier

FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "plans"

Row = list[Any]


def fixture_names() -> list[str]:
    """Every fixture: the 4.x plans, then `spark35/NAME` where PySpark 3.5's plan differs."""
    spark35 = sorted(f"spark35/{path.stem}" for path in (FIXTURES_DIR / "spark35").glob("*.json"))
    return sorted(path.stem for path in FIXTURES_DIR.glob("*.json")) + spark35


def load_case(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES_DIR / f"{name}.json").read_text())


def source_name(relation: Node) -> str:
    return table_identifier(relation) or relation.cls


def edge_rows(edges: tuple[InputEdge, ...]) -> list[Row]:
    rows = {
        (source_name(edge.relation), edge.column, t.type, t.subtype, t.description, t.masking)
        for edge in edges
        for t in edge.transformations
    }
    return [list(row) for row in sorted(rows)]


CATALOG_TABLE_KEPT = frozenset({"product-class", "identifier", "tableType", "storage", "provider", "partitionColumnNames"})
ATTRIBUTE_UNREAD = frozenset({"qualifier", "metadata", "nullable"})


def without_unread_parts(value: Any) -> Any:
    """Spark's toJSON() of a plan without what the listener's compact dump leaves out: a
    CatalogTable's schema, statistics and properties; an ExprId's class and JVM id; an
    attribute's qualifier, metadata and nullability (see SparkLineageCompactPlan.java)."""
    if isinstance(value, list):
        return [without_unread_parts(item) for item in value]
    if not isinstance(value, dict):
        return value
    product_class = str(value.get("product-class", ""))
    if product_class.endswith(".ExprId"):
        return {"id": value["id"]}
    if product_class.endswith(".CatalogTable"):
        value = {key: item for key, item in value.items() if key in CATALOG_TABLE_KEPT}
    if str(value.get("class", "")).endswith(("AttributeReference", "PrettyAttribute")):
        value = {key: item for key, item in value.items() if key not in ATTRIBUTE_UNREAD}
    return {key: without_unread_parts(item) for key, item in value.items()}


def compact(result: ColumnLineage) -> dict[str, Any]:
    return {
        "expected": {column: edge_rows(edges) for column, edges in result.columns.items()},
        "dataset": edge_rows(result.dataset),
    }


def run_case(case: dict[str, Any]) -> ColumnLineage:
    """Lineage of a fixture's plan: of its write command's query when the root is a write."""
    root = parse_plan(case["plan"])
    cached = {int(key): parse_plan(plan) for key, plan in (case.get("cached_plans") or {}).items()}
    command = write_command(root)
    if command is not None:
        return column_lineage(command.query, cached, command.output_columns)
    return column_lineage(root, cached, case.get("columns"))
