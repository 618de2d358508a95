"""Which attributes an expression reads, and in what role (the per-edge transformation kind).

The role starts as DIRECT/IDENTITY for a bare column and DIRECT/TRANSFORMATION otherwise, and
changes while descending: into an aggregate function (AGGREGATION), a CASE/IF condition or a
COALESCE fallback test (INDIRECT/CONDITIONAL), a window's PARTITION BY / ORDER BY
(INDIRECT/WINDOW). Masking functions (hashes, count) mark everything beneath them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from attrs import frozen

from emitter.expressions import TRANSPARENT
from emitter.lineage.model import (
    AGGREGATION,
    CONDITIONAL,
    DIRECT,
    IDENTITY,
    INDIRECT,
    TRANSFORMATION,
    WINDOW,
)
from emitter.plan import ATTRIBUTE_CLASSES, Expr, Node

MASKING_FUNCTIONS = frozenset({
    "Sha1", "Sha2", "Md5", "Crc32", "Murmur3Hash", "XxHash64", "HiveHash", "Mask",
    "Count", "HyperLogLogPlusPlus", "CountIf", "CountMinSketchAgg", "HllSketchAgg", "BloomFilterAggregate",
})
CONDITIONAL_FALLBACKS = frozenset({"Coalesce", "Nvl", "Nvl2", "IfNull"})
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
    """Every attribute `expr` reads with its role; subquery plans are handed to `on_subplan`."""
    start = role or initial_role(expr)
    return list(_walk(expr, start, on_subplan))


def _walk(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    cls = expr.cls
    if cls in ATTRIBUTE_CLASSES:
        expr_id = expr.expr_id
        if expr_id is not None:
            yield Reference(expr_id, role)
        return
    if cls == "NamedLambdaVariable":
        return
    if cls in MASKING_FUNCTIONS:
        role = role.masked()
    handler = _SPECIAL.get(cls)
    if handler is not None:
        yield from handler(expr, role, on_subplan)
        return
    for child in expr.children:
        yield from _walk(child, role, on_subplan)


def _aggregate(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    function = expr.children[0] if expr.children else None
    inner = role.direct(AGGREGATION)
    if function is not None and function.cls in MASKING_FUNCTIONS:
        inner = inner.masked()
    if function is not None:
        for child in function.children:
            yield from _walk(child, inner, on_subplan)
    for condition in expr.children[1:]:
        yield from _walk(condition, role.indirect(CONDITIONAL), on_subplan)


def _case_when(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    branch_count = len(expr.fields.get("branches") or ())
    for index, child in enumerate(expr.children):
        is_condition = index < 2 * branch_count and index % 2 == 0
        yield from _walk(child, role.indirect(CONDITIONAL) if is_condition else _valued(role), on_subplan)


def _if(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    for index, child in enumerate(expr.children):
        yield from _walk(child, role.indirect(CONDITIONAL) if index == 0 else _valued(role), on_subplan)


def _coalesce(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    for index, child in enumerate(expr.children):
        yield from _walk(child, _valued(role), on_subplan)
        if index < len(expr.children) - 1:
            yield from _walk(child, role.indirect(CONDITIONAL), on_subplan)


def _valued(role: Role) -> Role:
    """A branch value inside CASE/IF/COALESCE is a transformation, never a pure identity."""
    return role.direct(TRANSFORMATION) if role.subtype == IDENTITY else role


def _window_expression(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    function, *spec = expr.children
    yield from _walk(function, role.direct(TRANSFORMATION) if role.subtype == IDENTITY else role, on_subplan)
    for child in spec:
        yield from _walk(child, role.indirect(WINDOW), on_subplan)


def _ranking(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    for child in expr.children:
        yield from _walk(child, role.indirect(WINDOW), on_subplan)


def _lambda(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    if expr.children:
        yield from _walk(expr.children[0], role, on_subplan)


def _outer_reference(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    inner = expr.field_expr("e")
    if isinstance(inner, Expr):
        yield from _walk(inner, role, on_subplan)


def _subquery(expr: Expr, role: Role, on_subplan: SubplanSink) -> Iterator[Reference]:
    plan = expr.subplan
    if plan is not None:
        on_subplan(plan)
        outputs = plan.output[:1] if expr.cls == "ScalarSubquery" else plan.output
        for attribute in outputs:
            yield Reference(attribute.expr_id, role)
    correlation = role.indirect(CONDITIONAL) if expr.cls == "ScalarSubquery" else role
    for child in expr.children:
        yield from _walk(child, correlation, on_subplan)


_SPECIAL: dict[str, Callable[[Expr, Role, SubplanSink], Iterator[Reference]]] = {
    "AggregateExpression": _aggregate,
    "CaseWhen": _case_when,
    "If": _if,
    "WindowExpression": _window_expression,
    "LambdaFunction": _lambda,
    "OuterReference": _outer_reference,
    **{name: _coalesce for name in CONDITIONAL_FALLBACKS},
    **{name: _ranking for name in RANKING_FUNCTIONS},
    **{name: _subquery for name in SUBQUERY_EXPRESSIONS},
}
