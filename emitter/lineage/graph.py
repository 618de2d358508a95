"""Build the dependency graph of a plan: expr id -> [(upstream expr id, transformation)].

One small handler per operator kind (HANDLERS); each reads its node and records, on the shared
`Graph`, the edges of the attributes the node defines, the leaf columns it exposes, and the
dataset-level INDIRECT references (JOIN, FILTER, GROUP_BY, SORT) it applies. Nodes whose output
ids are their children's (Filter, Limit, Repartition...) need no edges: the ids flow through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from attrs import define, field

from emitter.capture import PushedFilter
from emitter.expressions import ELLIPSIS, display_name, function_name, render, truncate
from emitter.lineage.dependencies import Reference, Role, initial_role, references, strip_transparent
from emitter.lineage.model import (
    DIRECT,
    FILTER,
    GROUP_BY,
    IDENTITY,
    INDIRECT,
    JOIN,
    SORT,
    TRANSFORMATION,
    Transformation,
)
from emitter.lineage.row_level import merge_rows
from emitter.plan import ATTRIBUTE_CLASSES, Attribute, Expr, Node, leaf_key, simple_class

MAX_INLINE_DEPTH = 40
GROUPING_ID_NAME = "spark_grouping_id"

# Operators whose output attributes are exactly (a subset of) their children's: ids flow through.
PASS_THROUGH = frozenset(
    {
        "GlobalLimit",
        "LocalLimit",
        "Limit",
        "Offset",
        "Tail",
        "Sample",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "SubqueryAlias",
        "View",
        "ResolvedHint",
        "CollectMetrics",
        "EventTimeWatermark",
        "UpdateEventTimeWatermarkColumn",
        "ReturnAnswer",
        "WithCTE",
        "CTERelationDef",
        "WriteFiles",
        "Subquery",
        "OneRowRelation",
        "WithWindowDefinition",
        "AttachDistributedSequence",
        "Coalesce",
        "DeserializeToObject",
        "SerializeFromObject",
        "WindowGroupLimit",
    }
)
# Leaf relations: each output attribute is a source column.
LEAF_RELATIONS = frozenset(
    {
        "LogicalRelation",
        "HiveTableRelation",
        "DataSourceV2Relation",
        "DataSourceV2ScanRelation",
        "StreamingRelation",
        "StreamingRelationV2",
        "StreamingDataSourceV2Relation",
        "StreamingDataSourceV2ScanRelation",
        "StreamingExecutionRelation",
        "LocalRelation",
        "LogicalRDD",
        "Range",
        "InMemoryRelation",
        "ExternalRDD",
        "StreamingRelationExec",
    }
)
# Python / script operators whose output is computed from every input column.
OPAQUE_FUNCTIONS = frozenset(
    {
        "MapInPandas",
        "MapInArrow",
        "PythonMapInArrow",
        "FlatMapGroupsInPandas",
        "FlatMapGroupsInArrow",
        "FlatMapCoGroupsInPandas",
        "FlatMapCoGroupsInArrow",
        "FlatMapGroupsInPandasWithState",
        "ScriptTransformation",
        "HiveScriptTransformation",
        "MapPartitions",
        "MapPartitionsInR",
        "MapElements",
        "AppendColumns",
        "FlatMapGroupsWithState",
        "TransformWithState",
    }
)


@define
class Graph:
    """Everything the walk needs, filled once by the handlers."""

    cached_plans: Mapping[int, Node] = field(factory=dict)
    # leaf key -> the filters its scan evaluates itself
    pushed_filters: Mapping[int, Sequence[PushedFilter]] = field(factory=dict)
    edges: dict[int, list[tuple[int, Transformation]]] = field(factory=dict)
    leaves: dict[int, tuple[Node, str]] = field(factory=dict)
    dataset: list[tuple[int, Transformation]] = field(factory=list)
    relations: list[Node] = field(factory=list)
    _relation_ids: set[int] = field(factory=set)
    warnings: list[str] = field(factory=list)
    names: dict[int, str] = field(factory=dict)
    definitions: dict[int, Expr] = field(factory=dict)
    # Join keys on a side where Spark infers `isnotnull(key)` filters (see `_inferring_sides`).
    inferable_key_ids: set[int] = field(factory=set)
    generator_input_ids: set[int] = field(factory=set)
    declared: set[int] = field(factory=set)
    # Indexes into `dataset` of lone `isnotnull(x)` filters: dropped when x's source column is
    # also an inferable join key or filtered otherwise (the optimizer infers them through aliases).
    weak_filters: set[int] = field(factory=set)
    # Indexes into `dataset` of entries the optimizer can infer `isnotnull` filters from.
    inference_sources: set[int] = field(factory=set)
    cte_definitions: dict[int, Node] = field(factory=dict)
    # ROLLUP / CUBE / GROUPING SETS: grouping-id expr id -> its Expand's grouping columns, in order.
    grouping_ids: dict[int, tuple[Expr, ...]] = field(factory=dict)
    _visited: set[int] = field(factory=set)
    _texts: dict[int, str] = field(factory=dict)
    _rendering: set[int] = field(factory=set)

    # ---- building -------------------------------------------------------------------------
    def add_plan(self, root: Node) -> None:
        """Record every node of `root` (and of subqueries and cached plans beneath it) once."""
        # Children before parents, so a node's text can inline the definitions beneath it.
        fresh = [node for node in reversed(list(root.walk())) if id(node) not in self._visited]
        self._visited.update(id(node) for node in fresh)
        for node in fresh:
            self._prescan(node)
        names = self.names
        for node in fresh:
            children = node.children
            if not (len(children) == 1 and node.output is children[0].output):  # else named with its child
                for attribute in node.output:
                    names.setdefault(attribute.expr_id, attribute.name)
            handler = HANDLERS.get(node.cls)
            if handler is None:
                handler = _leaf if (not node.children and node.output) else _unknown
            try:
                handler(node, self)
            except Exception as error:  # noqa: BLE001 - a plan shape we did not foresee degrades
                self.warn(f"{node.cls}: {type(error).__name__} while reading the node; treated as unknown")
                _unknown(node, self, warn=False)

    def _prescan(self, node: Node) -> None:
        if node.cls == "Join":
            condition = node.expr("condition")
            if condition is not None:
                self.inferable_key_ids.update(_inferable_keys(node, condition))
        if node.cls == "Generate":
            generator = node.expr("generator")
            if generator is not None:
                self.generator_input_ids.update(ref.expr_id for ref in references(generator, lambda _: None))
        if node.cls == "CTERelationDef":
            cte_id = node.fields.get("id")
            if isinstance(cte_id, int):
                self.cte_definitions[cte_id] = node

    def add_edge(self, target: int, source: int, transformation: Transformation) -> None:
        if target != source:
            self.edges.setdefault(target, []).append((source, transformation))

    def add_expression(self, target: Attribute | int, expr: Expr, role: Role | None = None, inline: bool = True) -> None:
        """`target` is computed by `expr`: an edge per attribute it reads, described by its text.

        With `inline`, later descriptions print `expr` in place of the target's internal name.
        """
        target_id = target.expr_id if isinstance(target, Attribute) else target
        self.declared.add(target_id)
        if self.grouping_ids:
            expr = _name_grouping_functions(expr, self.grouping_ids)
        refs = references(expr, self.add_plan, role)
        bare = strip_transparent(expr)
        if inline and bare.cls not in ATTRIBUTE_CLASSES:
            self.definitions.setdefault(target_id, bare)
        for ref in refs:
            self.add_edge(target_id, ref.expr_id, self._transformation(ref, expr, target_id))

    def add_dataset(self, expr: Expr, subtype: str, description: str | None = None, infers_not_null: bool = False) -> None:
        text = description if description is not None else self.text(expr)
        for ref in references(expr, self.add_plan):
            if infers_not_null or ref.expr_id in self.inferable_key_ids:
                self.inference_sources.add(len(self.dataset))
            self.dataset.append((ref.expr_id, Transformation(INDIRECT, subtype, text, ref.role.masking)))

    def add_pushed_filters(self) -> None:
        """The filters the leaves' scans evaluate themselves (`pushed_filters`), after the plan's
        own: where Spark kept a filter in its plan too, its text is the one reported."""
        for node in list(self.relations):
            _pushed_filters(node, self)

    def add_leaf(self, node: Node) -> None:
        if id(node) not in self._relation_ids:
            self._relation_ids.add(id(node))
            self.relations.append(node)
        for attribute in node.output:
            self.leaves.setdefault(attribute.expr_id, (node, attribute.name))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _transformation(self, ref: Reference, expr: Expr, target_id: int) -> Transformation:
        role = ref.role
        if role.type == DIRECT and role.subtype == IDENTITY:
            source_name = self.names.get(ref.expr_id)
            target_name = self.names.get(target_id) or (expr.name or "")
            description = f"{source_name} AS {target_name}" if source_name and source_name != target_name else ""
            return Transformation(DIRECT, IDENTITY, description, role.masking)
        return Transformation(role.type, role.subtype, self.text(expr), role.masking)

    # ---- text -----------------------------------------------------------------------------
    def text(self, expr: Expr) -> str:
        try:
            return truncate(render(expr, self._attribute_text))
        except RecursionError:  # a generated expression thousands deep: name its top only
            return f"{function_name(expr.cls)}({ELLIPSIS})"
        except (IndexError, KeyError, TypeError, AttributeError, ValueError):  # an unforeseen shape
            return function_name(expr.cls)

    def _attribute_text(self, attribute: Expr) -> str:
        expr_id = attribute.expr_id
        if expr_id is None:
            return display_name(str(attribute.name))
        if expr_id in self._texts:
            return self._texts[expr_id]
        definition = self.definitions.get(expr_id)
        if definition is None or expr_id in self._rendering or len(self._rendering) > MAX_INLINE_DEPTH:
            return display_name(str(attribute.name))
        self._rendering.add(expr_id)
        try:
            text = truncate(render(definition, self._attribute_text))
        finally:
            self._rendering.discard(expr_id)
        self._texts[expr_id] = text
        return text


Handler = Callable[[Node, Graph], None]


def _named_expressions(node: Node, field_name: str, graph: Graph) -> None:
    for expr in node.expr_list(field_name):
        attribute = expr.attribute()
        if attribute is None:
            continue
        graph.names.setdefault(attribute.expr_id, attribute.name)
        if expr.cls == "Alias" and expr.children:
            graph.add_expression(attribute, expr.children[0], initial_role(expr))


def _project(node: Node, graph: Graph) -> None:
    _named_expressions(node, "projectList", graph)


def _aggregate(node: Node, graph: Graph) -> None:
    _named_expressions(node, "aggregateExpressions", graph)
    for grouping in node.expr_list("groupingExpressions"):
        graph.add_dataset(grouping, GROUP_BY)


def _window(node: Node, graph: Graph) -> None:
    _named_expressions(node, "windowExpressions", graph)


def _filter(node: Node, graph: Graph) -> None:
    condition = node.expr("condition")
    if condition is None:
        return
    conjuncts = _conjuncts(condition)
    for conjunct in conjuncts:
        if _is_inferred_not_null(conjunct, conjuncts, graph):
            continue
        weak = conjunct.cls == "IsNotNull"
        if weak:
            graph.weak_filters.add(len(graph.dataset))
        graph.add_dataset(conjunct, FILTER, infers_not_null=not weak)


def _conjuncts(expr: Expr) -> list[Expr]:
    if expr.cls == "And":
        return [part for child in expr.children for part in _conjuncts(child)]
    return [expr]


def _is_inferred_not_null(conjunct: Expr, conjuncts: list[Expr], graph: Graph) -> bool:
    """`isnotnull(x)` the optimizer infers from a join key or another predicate on `x`, and
    `size(x) > 0` it infers below an explode of `x`."""
    if _is_inferred_non_empty(conjunct, graph):
        return True
    if conjunct.cls != "IsNotNull" or not conjunct.children:
        return False
    target = strip_transparent(conjunct.children[0]).expr_id
    if target is None:
        return False
    if target in graph.inferable_key_ids or target in graph.generator_input_ids:
        return True
    return any(other is not conjunct and any(item.expr_id == target for item in other.walk()) for other in conjuncts)


def _inferable_keys(join: Node, condition: Expr) -> set[int]:
    """Ids the condition reads from a side Spark adds inferred `isnotnull` filters to
    (InferFiltersFromConstraints): both sides of inner and semi joins, the null-supplying side
    of an outer join, the right side of an anti join, neither side of a full outer join. A
    filter on a LEFT JOIN's preserved side is the user's, even on a join key."""
    side_ids = [{attribute.expr_id for attribute in child.output} for child in join.children[:2]]
    keys: set[int] = set()
    for ref in references(condition, lambda _: None):
        for index in _inferring_sides(join):
            if index < len(side_ids) and ref.expr_id in side_ids[index]:
                keys.add(ref.expr_id)
    return keys


def _inferring_sides(join: Node) -> tuple[int, ...]:
    name = _join_type(join)
    if name in ("Inner", "Cross", "LeftSemi") or name.startswith("Inner"):
        return (0, 1)
    if name == "RightOuter":
        return (0,)
    if name in ("LeftOuter", "LeftAnti"):
        return (1,)
    return ()


def _join_type(join: Node) -> str:
    join_type = join.fields.get("joinType")
    if not isinstance(join_type, dict):
        return ""
    return simple_class(str(join_type.get("object") or join_type.get("product-class") or ""))


def _is_inferred_non_empty(conjunct: Expr, graph: Graph) -> bool:
    if conjunct.cls != "GreaterThan" or len(conjunct.children) != 2:
        return False
    size, zero = conjunct.children
    if size.cls != "Size" or zero.cls != "Literal" or str(zero.fields.get("value")) != "0":
        return False
    target = strip_transparent(size.children[0]).expr_id if size.children else None
    return target is not None and target in graph.generator_input_ids


def _join(node: Node, graph: Graph) -> None:
    condition = node.expr("condition")
    if condition is not None:
        graph.add_dataset(condition, JOIN)
    join_type = node.fields.get("joinType")
    if isinstance(join_type, dict) and _join_type(node) == "ExistenceJoin":
        exists = node.output[-1] if node.output else None
        if exists is not None and condition is not None:
            graph.add_expression(exists, condition, Role(DIRECT, TRANSFORMATION), inline=False)
            graph.definitions[exists.expr_id] = Expr("Exists", (), {})


def _sort(node: Node, graph: Graph) -> None:
    for order in node.expr_list("order"):
        graph.add_dataset(order, SORT)


def _deduplicate(node: Node, graph: Graph) -> None:
    """dropDuplicates(keys) keeps one row per key: the keys group the rows, like GROUP BY."""
    for key in node.expr_list("keys"):
        graph.add_dataset(key, GROUP_BY)


def _distinct(node: Node, graph: Graph) -> None:
    """DISTINCT (analyzed plans; the optimizer turns it into an Aggregate) groups by every column."""
    for attribute in node.output:
        graph.dataset.append((attribute.expr_id, Transformation(INDIRECT, GROUP_BY, attribute.name)))


def _union(node: Node, graph: Graph) -> None:
    for child in node.children[1:]:
        for target, source in zip(node.output, child.output, strict=False):
            rename = f"{source.name} AS {target.name}" if source.name != target.name else ""
            graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, IDENTITY, rename))


def _set_filter(node: Node, graph: Graph) -> None:
    """INTERSECT / EXCEPT keep left rows; the right side only filters them."""
    description = node.cls.upper()
    for child in node.children[1:]:
        for attribute in child.output:
            graph.dataset.append((attribute.expr_id, Transformation(INDIRECT, FILTER, description)))


def _expand(node: Node, graph: Graph) -> None:
    _record_grouping_id(node, graph)
    projections = node.exprs.get("projections")
    if not projections:
        _expand_by_name(node, graph)
        return
    graph.declared.update(attribute.expr_id for attribute in node.output)
    for projection in projections:
        items = projection if isinstance(projection, tuple) else (projection,)
        for target, item in zip(node.output, items, strict=False):
            if isinstance(item, Expr) and item.cls != "Literal":
                graph.add_expression(target, item, inline=False)


def _expand_by_name(node: Node, graph: Graph) -> None:
    """Spark sometimes serializes Expand's projections as null: a new grouping attribute is then
    the child column of the same name (Spark names them after it); the grouping id has none."""
    inputs = node.children[0].output if node.children else ()
    input_ids = {attr.expr_id for attr in inputs}
    by_name: dict[str, Attribute] = {}
    for attribute in inputs:
        by_name.setdefault(display_name(attribute.name), attribute)
    for target in node.output:
        source = by_name.get(display_name(target.name))
        if target.expr_id not in input_ids and source is not None:
            graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, IDENTITY))
        graph.declared.add(target.expr_id)


def _record_grouping_id(node: Node, graph: Graph) -> None:
    """An Expand for ROLLUP / CUBE / GROUPING SETS outputs the child's columns, then one new
    column per grouping expression, then `spark_grouping_id` (bit i set = expression n-1-i
    aggregated away); `grouping(c)` / `grouping_id(...)` are rewritten into bit tests on it."""
    if not node.output or node.output[-1].name != GROUPING_ID_NAME:
        return
    inputs = {attribute.expr_id for child in node.children for attribute in child.output}
    grouping = tuple(
        Expr("AttributeReference", (), {"name": attribute.name, "exprId": {"id": attribute.expr_id}})
        for attribute in node.output[:-1]
        if attribute.expr_id not in inputs
    )
    graph.grouping_ids[node.output[-1].expr_id] = grouping


def _name_grouping_functions(expr: Expr, grouping_ids: Mapping[int, tuple[Expr, ...]]) -> Expr:
    """`CAST((shiftright(gid, k) & 1) AS BYTE)` back to `grouping(c)` and a bare `gid` to
    `grouping_id(c1, ..., cn)`, so both read (INDIRECT/GROUP_BY) the grouping columns they name."""
    if expr.cls in ATTRIBUTE_CLASSES:
        columns = grouping_ids.get(expr.expr_id)  # type: ignore[arg-type]
        return Expr("GroupingID", columns, {}) if columns else expr
    column = _grouping_bit(expr, grouping_ids)
    if column is not None:
        return Expr("Grouping", (column,), {})
    if not expr.children:
        return expr
    return expr._replace(children=tuple(_name_grouping_functions(child, grouping_ids) for child in expr.children))


def _grouping_bit(expr: Expr, grouping_ids: Mapping[int, tuple[Expr, ...]]) -> Expr | None:
    """The grouping column tested by `[CAST(](shiftright(gid, k) & 1)[ AS BYTE)]`, if `expr` is one."""
    if expr.cls == "Cast" and expr.children:
        expr = expr.children[0]
    if expr.cls != "BitwiseAnd" or len(expr.children) != 2 or not _is_literal(expr.children[1], 1):
        return None
    shift = expr.children[0]
    if shift.cls != "ShiftRight" or len(shift.children) != 2 or shift.children[0].cls not in ATTRIBUTE_CLASSES:
        return None
    columns = grouping_ids.get(shift.children[0].expr_id)  # type: ignore[arg-type]
    offset = shift.children[1].fields.get("value")
    if not columns or shift.children[1].cls != "Literal" or not str(offset).isdigit():
        return None
    index = len(columns) - 1 - int(str(offset))
    return columns[index] if 0 <= index < len(columns) else None


def _is_literal(expr: Expr, value: int) -> bool:
    return expr.cls == "Literal" and str(expr.fields.get("value")) == str(value)


def _generate(node: Node, graph: Graph) -> None:
    generator = node.expr("generator")
    if generator is None:
        return
    for attribute in _generator_output(node):
        graph.add_expression(attribute, generator, Role(DIRECT, TRANSFORMATION), inline=False)


def _generator_output(node: Node) -> tuple[Attribute, ...]:
    return tuple(attr for expr in node.expr_list("generatorOutput") if (attr := expr.attribute()))


def _python_eval(node: Node, graph: Graph) -> None:
    """BatchEvalPython / ArrowEvalPython: resultAttrs[i] is udfs[i] applied to its arguments."""
    results = [attr for expr in node.expr_list("resultAttrs") if (attr := expr.attribute())]
    for result, udf in zip(results, node.expr_list("udfs"), strict=False):
        graph.add_expression(result, udf, Role(DIRECT, TRANSFORMATION))


def _python_udtf(node: Node, graph: Graph) -> None:
    udtf = node.expr("udtf")
    if udtf is None:
        return
    for expr in node.expr_list("resultAttrs"):
        attribute = expr.attribute()
        if attribute is not None:
            graph.add_expression(attribute, udtf, Role(DIRECT, TRANSFORMATION), inline=False)


def _opaque(node: Node, graph: Graph) -> None:
    """mapInPandas & co: each output column may come from any input column."""
    function = node.expr("functionExpr") or node.expr("func")
    script = node.fields.get("script")
    if function is not None:
        description = graph.text(function)
    elif isinstance(script, str):
        description = truncate(f"TRANSFORM USING '{script}'")
    else:
        description = node.cls
    inputs = {attr.expr_id for child in node.children for attr in child.output}
    for target in node.output:
        if target.expr_id in inputs:
            continue
        for child in node.children:
            for source in child.output:
                graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, TRANSFORMATION, description))
    for grouping in node.expr_list("groupingAttributes") + node.expr_list("groupingExprs"):
        graph.add_dataset(grouping, GROUP_BY)


def _in_memory(node: Node, graph: Graph) -> None:
    """A cached DataFrame, or a foreachBatch micro-batch (a LogicalRDD) whose streaming query
    plan the caller knows: its columns are that plan's output columns, the same attributes
    (a cache) or, where the ids differ (a micro-batch), by position. (Spark 3.5's cached plan can
    be a Generate whose pruned child columns the JSON omits: positions would be off there.)"""
    key = leaf_key(node)
    cached = graph.cached_plans.get(key) if key is not None else None
    if cached is None:
        graph.add_leaf(node)
        return
    graph.add_plan(cached)
    defined = {attribute.expr_id for attribute in cached.output}
    if all(target.expr_id in defined for target in node.output):
        return
    for target, source in zip(node.output, cached.output, strict=False):
        graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, IDENTITY))


def _cte_reference(node: Node, graph: Graph) -> None:
    definition = graph.cte_definitions.get(node.fields.get("cteId"))  # type: ignore[arg-type]
    if definition is None:
        graph.add_leaf(node)
        graph.warn("CTERelationRef without its definition: columns treated as a source")
        return
    for target, source in zip(node.output, definition.output, strict=False):
        graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, IDENTITY))


def _leaf(node: Node, graph: Graph) -> None:
    if node.output:
        graph.add_leaf(node)


def _pushed_filters(node: Node, graph: Graph) -> None:
    """FILTER on each column a filter the leaf's scan evaluates itself reads: through the leaf's
    attribute of that column, or a column of its own when the scan does not output it. A lone
    `x IS NOT NULL` is weak, as in a Filter node (Spark infers and pushes those too)."""
    key = leaf_key(node)
    pushed = graph.pushed_filters.get(key) if key is not None else None
    if not pushed:
        return
    by_name = {attribute.name.lower(): attribute.expr_id for attribute in node.output}
    for pushed_filter in pushed:
        description, columns = pushed_filter.description, pushed_filter.columns
        weak = len(columns) == 1 and description.upper().endswith(" IS NOT NULL")
        for column in columns:
            expr_id = by_name.get(column.lower())
            if expr_id is None:
                expr_id = by_name[column.lower()] = -1 - len(graph.leaves)  # below every Catalyst expr id
                graph.leaves[expr_id] = (node, column)
            (graph.weak_filters if weak else graph.inference_sources).add(len(graph.dataset))
            graph.dataset.append((expr_id, Transformation(INDIRECT, FILTER, description)))


def _pass_through(node: Node, graph: Graph) -> None:
    return None


def _unknown(node: Node, graph: Graph, warn: bool = True) -> None:
    """Degrade: ids seen in children flow through; a new id takes the same-named child column,
    else every child column."""
    inputs = [attr for child in node.children for attr in child.output]
    input_ids = {attr.expr_id for attr in inputs}
    by_name = {attr.name: attr for attr in inputs}
    new_outputs = [attr for attr in node.output if attr.expr_id not in input_ids]
    if warn:
        graph.warn(f"unknown plan node {node.cls}: lineage passed through by expr id/name")
    for target in new_outputs:
        same_name = by_name.get(target.name)
        if same_name is not None:
            graph.add_edge(target.expr_id, same_name.expr_id, Transformation(DIRECT, IDENTITY))
            continue
        for source in inputs:
            graph.add_edge(target.expr_id, source.expr_id, Transformation(DIRECT, TRANSFORMATION, node.cls.lower()))


HANDLERS: dict[str, Handler] = {
    "Project": _project,
    "Aggregate": _aggregate,
    "Window": _window,
    "Filter": _filter,
    "Join": _join,
    "Sort": _sort,
    "Union": _union,
    "Deduplicate": _deduplicate,
    "Distinct": _distinct,
    "DeduplicateWithinWatermark": _deduplicate,
    "Intersect": _set_filter,
    "Except": _set_filter,
    "Expand": _expand,
    "Generate": _generate,
    "BatchEvalPython": _python_eval,
    "ArrowEvalPython": _python_eval,
    "BatchEvalPythonUDTF": _python_udtf,
    "ArrowEvalPythonUDTF": _python_udtf,
    "InMemoryRelation": _in_memory,
    "LogicalRDD": _in_memory,
    "CTERelationRef": _cte_reference,
    "MergeRows": merge_rows,
    **{name: _opaque for name in OPAQUE_FUNCTIONS},
    **{name: _leaf for name in LEAF_RELATIONS if name not in ("InMemoryRelation", "LogicalRDD")},
    **{name: _pass_through for name in PASS_THROUGH},
}
