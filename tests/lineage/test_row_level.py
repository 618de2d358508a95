"""Column lineage of row-level commands (MERGE INTO / UPDATE / DELETE) from the plans Spark 3.5 and
Iceberg build for them (`tests/fixtures/plans/row_level/`: copy-on-write `ReplaceData`, merge-on-read
`WriteDelta`; Delta Lake's own `MergeIntoCommand`, `UpdateCommand`, `DeleteCommand`), without Spark:
the same hand-written edges (`tests.support.lakehouse`) in both modes and both formats, as the live
tests (`tests/lakehouse/test_iceberg_row_level.py`, `test_delta_row_level.py`) check them end to end.

The target is `t (id, v, other)` partitioned by `other`, the source `s (id, v, op)`; a relation is
named `t` when it shares the command's table attributes, else `s`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emitter.lineage import InputEdge, column_lineage, write_command
from emitter.lineage.delta_commands import as_row_level
from emitter.lineage.row_level import row_level_command
from emitter.plan import Node, parse_plan
from tests.support.lakehouse import delete_lineage, merge_lineage, update_lineage

ROW_LEVEL = Path(__file__).resolve().parents[1] / "fixtures" / "plans" / "row_level"
COLUMNS = ("id", "v", "other")
Row = tuple[str, str, str, str, str]
DELTA_COMMANDS = {"merge": "MergeIntoCommand", "update": "UpdateCommand", "delete": "DeleteCommand"}

EXPECTED = {"merge": merge_lineage("t", "s"), "update": update_lineage("t"), "delete": delete_lineage("t")}


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


@pytest.mark.parametrize("statement", list(EXPECTED))
def test_delta_commands_give_the_lineage_of_the_same_statement_on_iceberg(statement: str) -> None:
    """Delta's command, rewritten into the row-level plan (`delta_commands`), answers as Iceberg's plans do."""
    root = parse_plan(_case(f"delta_{statement}")["plan"])
    assert root.cls == DELTA_COMMANDS[statement]
    command = write_command(root)
    assert command is not None and command.query.cls == "ReplaceData"
    assert command.output_columns == COLUMNS
    assert command.table == "default.t"
    row_level = row_level_command(command.query)
    assert row_level is not None and row_level.is_merge == (statement == "merge")

    result = column_lineage(command.query, {}, command.output_columns)

    columns, dataset = EXPECTED[statement]
    assert {name: _rows(edges, row_level.table) for name, edges in result.columns.items()} == columns
    assert _rows(result.dataset, row_level.table) == dataset
    assert result.warnings == ()


def test_a_delta_command_of_unknown_shape_degrades_to_its_target_columns() -> None:
    """A clause class the rewrite does not know: no row-level plan; each column from the target's own."""
    case = _case("delta_merge")
    plan = json.loads(json.dumps(case["plan"]))
    plan[0]["matchedClauses"][0][0]["class"] = "org.apache.spark.sql.catalyst.plans.logical.SomeFutureClause"
    root = parse_plan(plan)
    assert as_row_level(root) is None
    command = write_command(root)
    assert command is not None and command.query.cls == "SubqueryAlias"
    result = column_lineage(command.query, {}, command.output_columns)
    assert {
        name: {(e.column, t.subtype) for e in edges for t in e.transformations} for name, edges in result.columns.items()
    } == {column: {(column, "IDENTITY")} for column in COLUMNS}
