"""Column lineage of row-level commands (MERGE INTO / UPDATE / DELETE) from the plans Spark 3.5 and
Iceberg build for them (`tests/fixtures/plans/row_level/`: copy-on-write `ReplaceData`, merge-on-read
`WriteDelta`), without Spark: the same hand-written edges in both modes, as the live tests
(`tests/lakehouse/test_iceberg_row_level.py`) check them end to end.

The target is `t (id, v, other)` partitioned by `other`, the source `s (id, v, op)`; a relation is
named `t` when it shares the command's table attributes, else `s`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emitter.lineage import InputEdge, column_lineage, write_command
from emitter.lineage.row_level import row_level_command
from emitter.plan import Node, parse_plan

ROW_LEVEL = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "row_level"
COLUMNS = ("id", "v", "other")
Row = tuple[str, str, str, str, str]

MERGE = {
    "id": {("t", "id", "DIRECT", "IDENTITY", ""), ("s", "id", "DIRECT", "IDENTITY", "")},
    "v": {
        ("s", "v", "DIRECT", "TRANSFORMATION", "(v * 2)"),
        ("s", "op", "INDIRECT", "CONDITIONAL", "(op = 'u')"),
        ("s", "v", "DIRECT", "IDENTITY", ""),
        ("t", "v", "DIRECT", "IDENTITY", ""),
    },
    "other": {("t", "other", "DIRECT", "IDENTITY", "")},
}
MERGE_DATASET = {
    ("t", "id", "INDIRECT", "JOIN", "(id = id)"),
    ("s", "id", "INDIRECT", "JOIN", "(id = id)"),
    ("s", "op", "INDIRECT", "FILTER", "(op = 'd')"),
}
UPDATE = {
    "id": {("t", "id", "DIRECT", "IDENTITY", "")},
    "v": {
        ("t", "v", "DIRECT", "TRANSFORMATION", "(v + 1)"),
        ("t", "v", "DIRECT", "IDENTITY", ""),
        ("t", "id", "INDIRECT", "CONDITIONAL", "(id > 2)"),
    },
    "other": {("t", "other", "DIRECT", "IDENTITY", "")},
}
DELETE = {column: {("t", column, "DIRECT", "IDENTITY", "")} for column in COLUMNS}
EXPECTED: dict[str, tuple[dict[str, set[Row]], set[Row]]] = {
    "merge": (MERGE, MERGE_DATASET),
    "update": (UPDATE, {("t", "id", "INDIRECT", "FILTER", "(id > 2)")}),
    "delete": (DELETE, {("t", "v", "INDIRECT", "FILTER", "((v > 15) AND (v < 40))")}),
}


def _case(name: str) -> dict[str, Any]:
    return dict(json.loads((ROW_LEVEL / f"{name}.json").read_text()))


def _rows(edges: tuple[InputEdge, ...], table: Node) -> set[Row]:
    ids = {attribute.expr_id for attribute in table.output}
    return {
        ("t" if any(a.expr_id in ids for a in edge.relation.output) else "s", edge.column, t.type, t.subtype, t.description)
        for edge in edges
        for t in edge.transformations
    }


@pytest.mark.parametrize("mode", ["copy_on_write", "merge_on_read"])
@pytest.mark.parametrize("statement", list(EXPECTED))
def test_row_level_lineage_is_per_clause_and_the_same_in_both_modes(statement: str, mode: str) -> None:
    case = _case(f"{statement}_{mode}")
    root = parse_plan(case["plan"])
    assert root.cls == ("ReplaceData" if mode == "copy_on_write" else "WriteDelta")
    command = write_command(root)
    assert command is not None and command.query is root, "a row-level command is its own query"
    row_level = row_level_command(root)
    assert row_level is not None

    result = column_lineage(command.query, {}, COLUMNS)

    columns, dataset = EXPECTED[statement]
    assert {name: _rows(edges, row_level.table) for name, edges in result.columns.items()} == columns
    assert _rows(result.dataset, row_level.table) == dataset
    assert result.warnings == ()


def test_an_unknown_shape_degrades_to_the_query_lineage() -> None:
    """A ReplaceData without its table relation is no row-level command: plain query lineage."""
    case = _case("update_copy_on_write")
    plan = [dict(item) for item in case["plan"]]
    plan[0] = {key: value for key, value in plan[0].items() if key != "table"}
    root = parse_plan(plan)
    assert row_level_command(root) is None
    command = write_command(root)
    assert command is not None and command.query is not root
    result = column_lineage(command.query, {}, COLUMNS)
    assert set(result.columns) == set(COLUMNS)
