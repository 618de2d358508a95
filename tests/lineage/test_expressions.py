"""Rendering Catalyst expression JSON as SQL-ish text with the user's column names."""

from __future__ import annotations

from typing import Any

from emitter.expressions import ELLIPSIS, MAX_DESCRIPTION, render, truncate
from emitter.plan import Expr, parse_value

CATALYST = "org.apache.spark.sql.catalyst.expressions."


def _attr(name: str, expr_id: int, data_type: str = "string") -> dict[str, Any]:
    return {
        "class": CATALYST + "AttributeReference",
        "num-children": 0,
        "name": name,
        "dataType": data_type,
        "exprId": {"id": expr_id},
    }


def _lit(value: Any, data_type: str) -> dict[str, Any]:
    return {"class": CATALYST + "Literal", "num-children": 0, "value": value, "dataType": data_type}


def _node(cls: str, children: int, **fields: Any) -> dict[str, Any]:
    return {"class": CATALYST + cls, "num-children": children, **fields}


def _render(items: list[dict[str, Any]]) -> str:
    expr = parse_value(items)
    assert isinstance(expr, Expr)
    return render(expr, lambda attribute: f"{attribute.name}")


def test_binary_operators_are_infix_and_literals_are_typed() -> None:
    items = [_node("Add", 2), _attr("age", 1, "integer"), _lit("1", "integer")]
    assert _render(items) == "(age + 1)"
    assert _render([_node("Concat", 2), _attr("name", 2), _lit("it's", "string")]) == "concat(name, 'it\\'s')"
    assert _render([_lit(None, "string")]) == "NULL"


def test_case_when_branches_and_else() -> None:
    items = [
        _node("CaseWhen", 3, branches=[{}]),
        _node("GreaterThan", 2),
        _attr("age", 1, "integer"),
        _lit("18", "integer"),
        _attr("name", 2),
        _lit("minor", "string"),
    ]
    assert _render(items) == "CASE WHEN (age > 18) THEN name ELSE 'minor' END"


def test_aggregate_distinct_and_count_star() -> None:
    distinct = [_node("AggregateExpression", 1, isDistinct=True), _node("Count", 1), _attr("product", 3)]
    star = [_node("AggregateExpression", 1, isDistinct=False), _node("Count", 1), _lit("1", "integer")]
    assert _render(distinct) == "count(DISTINCT product)"
    assert _render(star) == "count(*)"


def test_unknown_classes_fall_back_to_lowercased_name_and_udfs_use_their_names() -> None:
    assert _render([_node("SomethingNew", 1), _attr("x", 4)]) == "somethingnew(x)"
    assert _render([_node("PythonUDF", 1, name="my_udf"), _attr("name", 2)]) == "my_udf(name)"
    assert _render([_node("ScalaUDF", 1, udfName="scala_fn"), _attr("name", 2)]) == "scala_fn(name)"


def test_implicit_casts_inside_calls_are_hidden_but_top_level_casts_shown() -> None:
    nested = [_node("Sha1", 1), _node("Cast", 1, dataType="binary"), _attr("name", 2)]
    top = [_node("Cast", 1, dataType="string"), _attr("age", 1, "integer")]
    assert _render(nested) == "sha1(name)"
    assert _render(top) == "CAST(age AS STRING)"


def test_long_text_is_truncated_with_an_ellipsis() -> None:
    text = truncate("x" * 500)
    assert len(text) == MAX_DESCRIPTION
    assert text.endswith(ELLIPSIS)
    assert truncate("short") == "short"


def test_common_subexpression_with_is_printed_with_its_definition_inlined() -> None:
    """Spark 4 rewrites BETWEEN to With(child, defs) and drops the ids from the JSON."""
    items = [
        _node("Between", 1),
        _node("With", 2, defs=[1]),
        _node("And", 2),
        _node("GreaterThanOrEqual", 2),
        _node("CommonExpressionRef", 0, id=None, dataType="date"),
        _lit("2000-08-23", "string"),
        _node("LessThanOrEqual", 2),
        _node("CommonExpressionRef", 0, id=None, dataType="date"),
        _lit("2000-09-06", "string"),
        _node("CommonExpressionDef", 1, id=None),
        _attr("d_date", 5, "date"),
    ]
    assert _render(items) == "((d_date >= '2000-08-23') AND (d_date <= '2000-09-06'))"
