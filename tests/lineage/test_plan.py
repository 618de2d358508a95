"""Parsing Spark's TreeNode JSON into the plan model."""

from __future__ import annotations

import json

import pytest

from emitter.plan import Attribute, PlanError, leaf_key, parse_plan, table_identifier
from tests.lineage.helpers import load_case


def test_parses_text_and_decoded_lists_alike() -> None:
    case = load_case("join_filter")
    from_list = parse_plan(case["plan"])
    from_text = parse_plan(json.dumps(case["plan"]))

    assert [node.cls for node in from_list.walk()] == [node.cls for node in from_text.walk()]
    assert [node.cls for node in from_list.walk()] == [
        "Project",
        "Join",
        "Project",
        "Filter",
        "LogicalRelation",
        "Filter",
        "LogicalRelation",
    ]
    assert [attr.name for attr in from_list.output] == ["customer_name", "company"]


def test_join_children_keep_left_right_order_and_output() -> None:
    join = parse_plan(load_case("join_filter")["plan"]).children[0]
    left, right = join.children
    assert join.cls == "Join"
    assert join.output == left.output + right.output
    assert table_identifier(next(n for n in left.walk() if not n.children)) == "default.customers"
    assert table_identifier(next(n for n in right.walk() if not n.children)) == "default.companies"


def test_leaf_key_is_the_first_output_attribute_id() -> None:
    root = parse_plan(load_case("select_star")["plan"])
    assert root.cls == "LogicalRelation"
    assert isinstance(root.output[0], Attribute)
    assert [attr.name for attr in root.output] == ["id", "company_name"]
    assert leaf_key(root) == root.output[0].expr_id
    assert root.output[0].data_type == "integer"
    assert leaf_key(parse_plan(load_case("project_alias")["plan"])) is None


def test_semi_join_outputs_only_the_left_side() -> None:
    join = parse_plan(load_case("semi_join_in")["plan"]).children[0]
    assert join.cls == "Join"
    assert join.output == join.children[0].output


def test_subquery_plans_nested_in_expressions_are_parsed() -> None:
    root = parse_plan(load_case("scalar_subquery")["plan"])
    subplans = [expr.subplan for item in root.expr_list("projectList") for expr in item.walk() if expr.subplan]
    assert len(subplans) == 1
    assert subplans[0].cls == "Aggregate"


def test_write_command_query_field_is_a_plan() -> None:
    root = parse_plan(load_case("write_ctas")["plan"])
    assert root.cls == "CreateDataSourceTableAsSelectCommand"
    assert root.exprs["query"].cls == "Project"


@pytest.mark.parametrize("bad", ["[]", "{}", '[{"x": 1}]', "[1, 2]"])
def test_rejects_what_is_not_a_plan(bad: str) -> None:
    with pytest.raises(PlanError):
        parse_plan(bad)


def test_rejects_truncated_and_trailing_nodes() -> None:
    items = load_case("join_filter")["plan"]
    with pytest.raises(PlanError, match="ends before"):
        parse_plan(items[:-1])
    with pytest.raises(PlanError, match="trailing"):
        parse_plan(items + items[-1:])


def test_a_leaf_reads_its_output_from_the_json_and_still_parses_it_when_asked() -> None:
    """A leaf relation's output (every column of its table) becomes its attributes straight from
    the JSON; its `output` field is parsed into expressions only when something reads it, and
    then reads as it would have been parsed when the node was built."""
    leaf = next(node for node in parse_plan(load_case("join_filter")["plan"]).walk() if node.cls == "LogicalRelation")
    assert "output" in leaf.exprs and "output" in list(leaf.exprs) and len(leaf.exprs) == len(list(leaf.exprs))
    parsed = leaf.exprs["output"]
    assert [expr.cls for expr in parsed] == ["AttributeReference"] * len(leaf.output)
    assert tuple(expr.attribute() for expr in parsed) == leaf.output
    assert leaf.exprs.get("output") is parsed and leaf.expr_list("output") == parsed
    assert leaf.exprs.get("no such field", "default") == "default"
    with pytest.raises(KeyError):
        leaf.exprs["no such field"]


def test_the_plan_model_is_the_same_built_backwards_or_in_order() -> None:
    """Well-formed lists are built in one backward pass; the in-order reader (kept for the error
    messages and for field lists of several trees) builds the same model."""
    from emitter import plan

    items = load_case("scalar_subquery")["plan"]
    backwards = parse_plan(items)
    in_order, consumed = plan._build_tree(items, 0, plan._make_node)
    assert consumed == len(items)

    def shape(node: plan.Node) -> list[object]:
        return [(n.cls, n.output, repr(sorted(n.exprs)), [repr(e) for e in n.expr_list("projectList")]) for n in node.walk()]

    assert shape(backwards) == shape(in_order)
