"""Which attributes an expression reads, and in what role (the per-edge transformation kind).

The role starts as DIRECT/IDENTITY for a bare column and DIRECT/TRANSFORMATION otherwise, and
changes while descending: into an aggregate function (AGGREGATION), a CASE/IF condition or a
COALESCE fallback test (INDIRECT/CONDITIONAL), a window's PARTITION BY / ORDER BY
(INDIRECT/WINDOW), grouping() / grouping_id() (INDIRECT/GROUP_BY). Masking functions (hashes, count) mark everything beneath them.
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import frozen

from emitter.expressions import TRANSPARENT
from emitter.lineage.model import (
    AGGREGATION,
    CONDITIONAL,
    DIRECT,
    GROUP_BY,
    IDENTITY,
    INDIRECT,
    TRANSFORMATION,
    WINDOW,
)
from emitter.plan import ATTRIBUTE_CLASSES, Expr, Node

MASKING_FUNCTIONS = frozenset(
    {
        "Sha1",
        "Sha2",
        "Md5",
        "Crc32",
        "Murmur3Hash",
        "XxHash64",
        "HiveHash",
        "Mask",
        "Count",
        "HyperLogLogPlusPlus",
        "CountIf",
        "CountMinSketchAgg",
        "HllSketchAgg",
        "BloomFilterAggregate",
    }
)
# Every argument but the last is tested for null to pick the result (docs/facets.md). Analyzed
# plans keep nvl/ifnull with their replacement coalesce as the only child (handled there), and
# nvl2(a, b, c) is an If(isnotnull(a), b, c).
CONDITIONAL_FALLBACKS = frozenset({"Coalesce", "Nvl", "IfNull"})
SUBQUERY_EXPRESSIONS = frozenset({"ScalarSubquery", "Exists", "ListQuery", "LateralSubquery", "InSubquery"})
RANKING_FUNCTIONS = frozenset({"Rank", "DenseRank", "PercentRank", "CumeDist"})


@frozen
class Role:
    type: str
    subtype: str
    masking: bool = False

    def indirect(self, subtype: str) -> Role:
        return Role(INDIRECT, subtype, self.masking)

    def direct(self, subtype: str) -> Role:
        if self.type == INDIRECT:
            return self
        return Role(DIRECT, subtype, self.masking)

    def masked(self) -> Role:
        return Role(self.type, self.subtype, True)


@frozen
class Reference:
    expr_id: int
    role: Role


SubplanSink = Callable[[Node], None]


def strip_transparent(expr: Expr) -> Expr:
    while (expr.cls in TRANSPARENT or expr.cls == "Alias") and expr.children:
        expr = expr.children[0]
    return expr


def initial_role(expr: Expr) -> Role:
    bare = strip_transparent(expr)
    return Role(DIRECT, IDENTITY if bare.cls in ATTRIBUTE_CLASSES else TRANSFORMATION)


def references(expr: Expr, on_subplan: SubplanSink, role: Role | None = None) -> list[Reference]:
    """Every attribute `expr` reads with its role; subquery plans are handed to `on_subplan`.

    Iterative (an explicit stack): generated expressions can nest thousands deep.
    """
    found: list[Reference] = []
    pending: list[tuple[Expr, Role]] = [(expr, role or initial_role(expr))]
    while pending:
        current, current_role = pending.pop()
        visits = _visit(current, current_role, on_subplan, found)
        pending.extend(reversed(visits))
    return found


Visits = list[tuple[Expr, Role]]


def _visit(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    """Record `expr`'s own reference (if an attribute); return its children with their roles."""
    cls = expr.cls
    if cls in ATTRIBUTE_CLASSES:
        expr_id = expr.expr_id
        if expr_id is not None:
            found.append(Reference(expr_id, role))
        return []
    if cls == "NamedLambdaVariable":
        return []
    if cls in MASKING_FUNCTIONS:
        role = role.masked()
    handler = _SPECIAL.get(cls)
    if handler is not None:
        return handler(expr, role, on_subplan, found)
    return [(child, role) for child in expr.children]


def _aggregate(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    function = expr.children[0] if expr.children else None
    inner = role.direct(AGGREGATION)
    if function is not None and function.cls in MASKING_FUNCTIONS:
        inner = inner.masked()
    visits = [(child, inner) for child in function.children] if function is not None else []
    return visits + [(condition, role.indirect(CONDITIONAL)) for condition in expr.children[1:]]


def _case_when(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    branch_count = len(expr.fields.get("branches") or ())
    return [
        (child, role.indirect(CONDITIONAL) if index < 2 * branch_count and index % 2 == 0 else _valued(role))
        for index, child in enumerate(expr.children)
    ]


def _if(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    return [(child, role.indirect(CONDITIONAL) if index == 0 else _valued(role)) for index, child in enumerate(expr.children)]


def _coalesce(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    visits: Visits = []
    for index, child in enumerate(expr.children):
        visits.append((child, _valued(role)))
        if index < len(expr.children) - 1:
            visits.append((child, role.indirect(CONDITIONAL)))
    return visits


def _valued(role: Role) -> Role:
    """A branch value inside CASE/IF/COALESCE is a transformation, never a pure identity."""
    return role.direct(TRANSFORMATION) if role.subtype == IDENTITY else role


def _window_expression(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    function, *spec = expr.children
    function_role = role.direct(TRANSFORMATION) if role.subtype == IDENTITY else role
    return [(function, function_role)] + [(child, role.indirect(WINDOW)) for child in spec]


def _ranking(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    return [(child, role.indirect(WINDOW)) for child in expr.children]


def _grouping(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    """grouping(c) / grouping_id(...) say which grouping set a row belongs to: they read the
    columns they name as grouping columns, not their values."""
    return [(child, role.indirect(GROUP_BY)) for child in expr.children]


def _lambda(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    return [(expr.children[0], role)] if expr.children else []


def _outer_reference(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    inner = expr.field_expr("e")
    return [(inner, role)] if isinstance(inner, Expr) else []


def _subquery(expr: Expr, role: Role, on_subplan: SubplanSink, found: list[Reference]) -> Visits:
    plan = expr.subplan
    if plan is not None:
        on_subplan(plan)
        outputs = plan.output[:1] if expr.cls == "ScalarSubquery" else plan.output
        found.extend(Reference(attribute.expr_id, role) for attribute in outputs)
    correlation = role.indirect(CONDITIONAL) if expr.cls == "ScalarSubquery" else role
    return [(child, correlation) for child in expr.children]


_SPECIAL: dict[str, Callable[[Expr, Role, SubplanSink, list[Reference]], Visits]] = {
    "AggregateExpression": _aggregate,
    "CaseWhen": _case_when,
    "If": _if,
    "WindowExpression": _window_expression,
    "LambdaFunction": _lambda,
    "Grouping": _grouping,
    "GroupingID": _grouping,
    "OuterReference": _outer_reference,
    **{name: _coalesce for name in CONDITIONAL_FALLBACKS},
    **{name: _ranking for name in RANKING_FUNCTIONS},
    **{name: _subquery for name in SUBQUERY_EXPRESSIONS},
}
