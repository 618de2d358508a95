"""Unknown operators and expressions degrade to pass-through lineage plus a warning, never a crash."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from emitter.expressions import render
from emitter.lineage import column_lineage
from emitter.plan import parse_plan
from tests.lineage.helpers import edge_rows, fixture_names, load_case

MYSTERY = "org.example.spark.MysteryNode"


def _renumbered(attribute_tree: list[dict[str, Any]], new_id: int) -> list[dict[str, Any]]:
    tree = copy.deepcopy(attribute_tree)
    tree[0]["exprId"] = {"product-class": "org.apache.spark.sql.catalyst.expressions.ExprId", "id": new_id}
    return tree


def _wrap(plan: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    return [{"class": MYSTERY, "num-children": 1, "child": 0, **fields}, *plan]


def test_unknown_node_keeping_child_ids_passes_lineage_through() -> None:
    plan = load_case("join_filter")["plan"]
    result = column_lineage(parse_plan(_wrap(plan)))

    assert edge_rows(result.columns["customer_name"]) == [
        ["default.customers", "name", "DIRECT", "IDENTITY", "name AS customer_name", False]
    ]
    assert result.warnings == ("unknown plan node MysteryNode: lineage passed through by expr id/name",)


def test_unknown_node_with_new_ids_maps_by_name_else_to_every_child_column() -> None:
    plan = load_case("project_alias")["plan"]
    child_output = parse_plan(plan).output
    project_list = plan[0]["projectList"]
    by_name = _renumbered(project_list[0], 900_001)  # customer_name: same name as a child column
    fresh = _renumbered(project_list[0], 900_002)
    fresh[0]["name"] = "mystery"
    result = column_lineage(parse_plan(_wrap(plan, output=[by_name, fresh])))

    assert [name for name in result.columns] == ["customer_name", "mystery"]
    assert edge_rows(result.columns["customer_name"]) == [
        ["default.customers", "name", "DIRECT", "IDENTITY", "name AS customer_name", False]
    ]
    assert {row[1] for row in edge_rows(result.columns["mystery"])} == {"name", "age", "id"}
    assert len(child_output) == 3
    assert len(result.warnings) == 1 and "MysteryNode" in result.warnings[0]


def test_unknown_expression_renders_as_lowercased_class_and_keeps_its_inputs() -> None:
    plan = copy.deepcopy(load_case("expressions")["plan"])
    initials = plan[0]["projectList"][2]
    assert initials[1]["class"].endswith(".Upper")
    initials[1]["class"] = "org.example.FancyThing"
    result = column_lineage(parse_plan(plan))

    assert edge_rows(result.columns["initials"]) == [
        ["default.customers", "name", "DIRECT", "TRANSFORMATION", "fancything(substring(name, 1, 2))", False]
    ]
    assert result.warnings == ()


def test_rendering_falls_back_for_unknown_attribute_text() -> None:
    expr = parse_plan(load_case("casts")["plan"]).expr_list("projectList")[0]
    assert render(expr, lambda attribute: attribute.name or "?") == "CAST(age AS STRING)"


CATALYST = "org.apache.spark.sql.catalyst.expressions."


def _age_relation() -> tuple[dict[str, Any], int]:
    relation = load_case("project_alias")["plan"][-1]
    return relation, relation["output"][2][0]["exprId"]["id"]


def _attribute(name: str, expr_id: int) -> dict[str, Any]:
    return {
        "class": CATALYST + "AttributeReference",
        "num-children": 0,
        "name": name,
        "dataType": "integer",
        "exprId": {"id": expr_id},
    }


def _plus_one(name: str, expr_id: int, source: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"class": CATALYST + "Alias", "num-children": 1, "name": name, "exprId": {"id": expr_id}},
        {"class": CATALYST + "Add", "num-children": 2},
        source,
        {"class": CATALYST + "Literal", "num-children": 0, "value": "1", "dataType": "integer"},
    ]


def test_expressions_thousands_deep_still_resolve() -> None:
    relation, age_id = _age_relation()
    depth = 3000
    chain: list[dict[str, Any]] = []
    for index in range(depth):
        chain += [
            {"class": CATALYST + "Add", "num-children": 2},
            {"class": CATALYST + "Literal", "num-children": 0, "value": str(index), "dataType": "integer"},
        ]
    chain.append(_attribute("age", age_id))
    alias = [{"class": CATALYST + "Alias", "num-children": 1, "name": "deep", "exprId": {"id": 10**6}}, *chain]
    project = {
        "class": "org.apache.spark.sql.catalyst.plans.logical.Project",
        "num-children": 1,
        "projectList": [alias],
        "child": 0,
    }

    result = column_lineage(parse_plan([project, relation]))

    assert [row[:4] for row in edge_rows(result.columns["deep"])] == [["default.customers", "age", "DIRECT", "TRANSFORMATION"]]


def test_plans_thousands_deep_still_resolve() -> None:
    relation, age_id = _age_relation()
    depth = 3000
    plan: list[dict[str, Any]] = []
    for level in range(depth, 0, -1):
        source = _attribute(f"c{level - 1}", 10**6 + level - 1) if level > 1 else _attribute("age", age_id)
        plan.append(
            {
                "class": "org.apache.spark.sql.catalyst.plans.logical.Project",
                "num-children": 1,
                "projectList": [_plus_one(f"c{level}", 10**6 + level, source)],
                "child": 0,
            }
        )
    plan.append(relation)

    result = column_lineage(parse_plan(plan))

    assert list(result.columns) == [f"c{depth}"]
    rows = edge_rows(result.columns[f"c{depth}"])
    assert [row[:4] for row in rows] == [["default.customers", "age", "DIRECT", "TRANSFORMATION"]]
    assert result.warnings == ()


@pytest.mark.parametrize("name", fixture_names())
def test_any_node_turned_unknown_degrades_without_raising(name: str) -> None:
    case = load_case(name)
    for index in range(len(case["plan"])):
        plan = copy.deepcopy(case["plan"])
        plan[index]["class"] = f"org.example.Unknown{index}"
        for key in [key for key, value in plan[index].items() if isinstance(value, list)][:1]:
            plan[index][key] = [{"class": "org.example.Broken", "num-children": 0}]

        result = column_lineage(parse_plan(plan))

        assert any(f"Unknown{index}" in warning for warning in result.warnings)


@pytest.mark.parametrize("name", fixture_names())
def test_known_nodes_with_garbled_fields_do_not_raise(name: str) -> None:
    case = load_case(name)
    for index, node in enumerate(case["plan"]):
        for key in [key for key, value in node.items() if isinstance(value, (list, dict)) and key != "class"]:
            for garbage in ([7], {"x": None}, [[{"class": "org.example.Odd", "num-children": 0, "branches": [1, 2]}]]):
                plan = copy.deepcopy(case["plan"])
                plan[index][key] = garbage
                column_lineage(parse_plan(plan))


def test_analyzed_distinct_groups_by_every_column() -> None:
    """Cached plans may come analyzed: Distinct is still there, as in `SELECT DISTINCT`."""
    relation, _ = _age_relation()
    distinct = {"class": "org.apache.spark.sql.catalyst.plans.logical.Distinct", "num-children": 1, "child": 0}

    result = column_lineage(parse_plan([distinct, relation]))

    columns = sorted(item[0]["name"] for item in relation["output"])
    assert columns == ["age", "birthday", "company_id", "id", "name"]
    assert [row[1:4] for row in edge_rows(result.dataset)] == [[name, "INDIRECT", "GROUP_BY"] for name in columns]
    assert result.warnings == ()


def test_cte_kept_as_with_cte_resolves_references_to_their_definition() -> None:
    """Spark keeps WithCTE/CTERelationRef in some commands (TPC-DS q02 under INSERT)."""
    logical = "org.apache.spark.sql.catalyst.plans.logical."
    definition_plan = load_case("project_alias")["plan"]  # customer_name, age, id
    reference_output = [
        _renumbered(item, 800_000 + index)
        for index, item in enumerate([[_attribute(name, 0)] for name in ("customer_name", "age", "id")])
    ]
    plan = [
        {"class": logical + "WithCTE", "num-children": 2, "plan": 1, "cteDefs": [0]},
        {"class": logical + "CTERelationDef", "num-children": 1, "child": 0, "id": 7},
        *definition_plan,
        {"class": logical + "Project", "num-children": 1, "child": 0, "projectList": [reference_output[0]]},
        {"class": logical + "CTERelationRef", "num-children": 0, "cteId": 7, "output": reference_output},
    ]

    result = column_lineage(parse_plan(plan))

    assert list(result.columns) == ["customer_name"]
    assert edge_rows(result.columns["customer_name"]) == [
        ["default.customers", "name", "DIRECT", "IDENTITY", "name AS customer_name", False]
    ]
    assert result.warnings == ()
