"""Column lineage of a Spark optimized logical plan — pure Python over `emitter.plan`.

    from emitter.plan import parse_plan
    from emitter.lineage import column_lineage, write_command

    command = write_command(parse_plan(plan_json))          # None unless the root writes
    result = column_lineage(command.query, cached_plans, command.output_columns)
    result.columns["customer_name"]  # -> (InputEdge(relation=<LogicalRelation>, column="name", ...),)

How: `graph.Graph` records, once per plan, every attribute's upstream edges keyed by Catalyst
expr id (one handler per operator), the leaf columns, and dataset-level INDIRECT references.
The walk below resolves each output attribute to leaf columns, memoized per expr id, composing
the transformations along each path with `model.compose` (INDIRECT beats DIRECT; the innermost
INDIRECT subtype wins; among DIRECT, AGGREGATION > TRANSFORMATION > IDENTITY; masking ORed;
description of the outermost non-IDENTITY step). Dataset-level entries keep their own subtype
(JOIN/FILTER/GROUP_BY/SORT) whatever path leads to the leaf, once per (relation, column, subtype).

Descriptions print the user's column names: a computed column referenced later is printed as
its defining expression (`sum(x)` rather than `_w0`), implicit coercion casts are left out,
and text is cut at ~200 characters with "…".

Optimizer-inferred predicates are not reported as FILTER: `isnotnull(x)` beside another
predicate on `x` or on a join key of a side Spark infers filters for (not a LEFT JOIN's
preserved side), and `size(arr) > 0` under an explode of `arr`; a lone `x IS NOT NULL` is kept
unless `x`'s source column is also such a join key or filtered otherwise.

A row-level command (`ReplaceData`, `WriteDelta`: MERGE / UPDATE / DELETE, which `write_command`
hands over whole as its query) is the lineage of its query refined by the command: the target's
own columns as identity for the rows it leaves alone, its WHERE as FILTER, the rewrite's
metadata columns and runtime file filter left out (`row_level`). Delta Lake runs the same statements
as commands of its own (`MergeIntoCommand`, `UpdateCommand`, `DeleteCommand`), which `write_command`
rewrites into that plan (`delta_commands`), so both formats answer alike.

A filter a V2 scan evaluates itself (Iceberg drops from Spark's plan those that select whole
partitions) is FILTER on the columns it reads when the caller passes it (`pushed_filters`).

`cached_plans` maps `plan.leaf_key(<InMemoryRelation>)` to the parsed plan it caches (optimized
or analyzed), and `plan.leaf_key(<LogicalRDD>)` of a foreachBatch micro-batch to its streaming
query's plan; the relation's columns are that plan's output columns by position.

Unknown operators degrade (ids pass through, else same name, else every child column) with one
warning naming the class; a handler failing on an unforeseen shape degrades the same way; plans
and expressions thousands deep are handled without recursion. The engine does not raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from emitter.capture import PushedFilter
from emitter.lineage import row_level
from emitter.lineage.graph import Graph
from emitter.lineage.model import (
    DIRECT,
    IDENTITY,
    INDIRECT,
    ColumnLineage,
    InputEdge,
    Transformation,
    compose,
)
from emitter.lineage.writes import WRITE_COMMANDS, WriteCommand, write_command
from emitter.plan import Attribute, Node

__all__ = [
    "ColumnLineage",
    "InputEdge",
    "PushedFilter",
    "Transformation",
    "WriteCommand",
    "WRITE_COMMANDS",
    "column_lineage",
    "write_command",
]

LeafPaths = frozenset[tuple[int, Transformation]]
EMPTY: LeafPaths = frozenset()
LEAF_STEP = Transformation(DIRECT, IDENTITY)


class _Walker:
    """Resolves expr ids to (leaf expr id, composed transformation) pairs, memoized."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.memo: dict[int, LeafPaths] = {}
        self.in_progress: set[int] = set()

    def resolve(self, expr_id: int) -> LeafPaths:
        """Depth-first without recursion (plans can chain thousands of computed columns);
        a back edge (a cycle, which a well-formed plan never has) contributes nothing."""
        memo = self.memo
        if expr_id in memo:
            return memo[expr_id]
        stack: list[tuple[int, bool]] = [(expr_id, False)]
        while stack:
            current, expanded = stack.pop()
            if current in memo:
                continue
            if not expanded:
                if current in self.in_progress:
                    continue
                self.in_progress.add(current)
                stack.append((current, True))
                stack.extend(
                    (source, False)
                    for source, _ in self.graph.edges.get(current, ())
                    if source not in memo and source not in self.in_progress
                )
                continue
            memo[current] = self._combine(current)
            self.in_progress.discard(current)
        return memo[expr_id]

    def _combine(self, expr_id: int) -> LeafPaths:
        paths: set[tuple[int, Transformation]] = set()
        if expr_id in self.graph.leaves:
            paths.add((expr_id, LEAF_STEP))
        for source, step in self.graph.edges.get(expr_id, ()):
            for leaf, inner in self.memo.get(source, EMPTY):
                paths.add((leaf, compose(step, inner)))
        return frozenset(paths)


def column_lineage(
    query: Node,
    cached_plans: Mapping[int, Node] | None = None,
    output_columns: Sequence[str] | None = None,
    pushed_filters: Mapping[int, Sequence[PushedFilter]] | None = None,
) -> ColumnLineage:
    """Lineage of each output column of `query` (named by `output_columns`, positionally, when given).
    `pushed_filters`: by `plan.leaf_key`, the filters a leaf's scan evaluates itself (Spark may
    have dropped them from the plan), reported as FILTER on the columns they read."""
    try:
        return _column_lineage(query, cached_plans or {}, output_columns, pushed_filters or {})
    except RecursionError:
        names = list(output_columns) if output_columns is not None else [attr.name for attr in query.output]
        return ColumnLineage(
            columns={name: () for name in names},
            dataset=(),
            relations=tuple(node for node in query.walk() if not node.children and node.output),
            warnings=("plan nested too deep for column lineage: columns left without inputs",),
        )


def _column_lineage(
    query: Node,
    cached_plans: Mapping[int, Node],
    output_columns: Sequence[str] | None,
    pushed_filters: Mapping[int, Sequence[PushedFilter]],
) -> ColumnLineage:
    command = row_level.row_level_command(query)
    if command is not None:
        query = command.query
    graph = Graph(cached_plans=cached_plans, pushed_filters=pushed_filters)
    graph.add_plan(query)
    graph.add_pushed_filters()
    if command is not None:
        row_level.add_command(command, graph)
    walker = _Walker(graph)
    columns: dict[str, tuple[InputEdge, ...]] = {}
    if command is not None:  # by name: a merge-on-read DELETE writes no column of the table
        for name, found in row_level.aligned(output_columns, command).items():
            columns[name] = _edges(walker.resolve(found.expr_id), graph) if found is not None else ()
    else:
        for name, attribute in _align(output_columns, query.output, graph):
            columns[name] = _edges(walker.resolve(attribute.expr_id), graph)
    result = ColumnLineage(
        columns=columns,
        dataset=_dataset_edges(walker, graph),
        relations=tuple(graph.relations),
        warnings=tuple(graph.warnings),
    )
    return row_level.refine(command, result, graph) if command is not None else result


def _align(names: Sequence[str] | None, attributes: tuple[Attribute, ...], graph: Graph) -> list[tuple[str, Attribute]]:
    """Target column names paired with query attributes: by position when the counts agree.

    Else the query shows more columns than it outputs: the JSON drops a root Generate's list of
    pruned child columns, and those precede the generator's outputs. So names are matched from
    the end, each to the nearest earlier attribute of that name: `explode(split(a, ' ')) AS a`
    pairs the output `a` with the generator's column, never with the pruned input `a`.
    """
    if names is None:
        return [(attribute.name, attribute) for attribute in attributes]
    if len(names) == len(attributes):
        return list(zip(names, attributes, strict=False))
    pairs: list[tuple[str, Attribute]] = []
    remaining = iter(reversed(attributes))
    for name in reversed(names):
        match = next((attr for attr in remaining if attr.name.lower() == name.lower()), None)
        if match is None:
            break
        pairs.append((name, match))
    if len(pairs) == len(names):
        return pairs[::-1]
    graph.warn(f"{len(names)} target columns for {len(attributes)} query columns: matched by position")
    return list(zip(names, attributes, strict=False))


def _edges(paths: LeafPaths, graph: Graph) -> tuple[InputEdge, ...]:
    grouped: dict[tuple[Node, str], list[Transformation]] = {}
    for leaf, transformation in paths:
        relation, column = graph.leaves[leaf]
        grouped.setdefault((relation, column), []).append(transformation)
    return _sorted_edges(grouped, graph)


def _dataset_edges(walker: _Walker, graph: Graph) -> tuple[InputEdge, ...]:
    grouped: dict[tuple[Node, str], list[Transformation]] = {}
    seen: set[tuple[int, str]] = set()
    inferring_leaves = {
        leaf
        for index, (expr_id, _) in enumerate(graph.dataset)
        if index in graph.inference_sources
        for leaf, _ in walker.resolve(expr_id)
    }
    for index, (expr_id, step) in enumerate(graph.dataset):
        for leaf, inner in walker.resolve(expr_id):
            if index in graph.weak_filters and leaf in inferring_leaves:
                continue
            if (leaf, step.subtype) in seen:
                continue
            seen.add((leaf, step.subtype))
            relation, column = graph.leaves[leaf]
            masking = step.masking or inner.masking
            grouped.setdefault((relation, column), []).append(Transformation(INDIRECT, step.subtype, step.description, masking))
    return _sorted_edges(grouped, graph)


def _sorted_edges(grouped: dict[tuple[Node, str], list[Transformation]], graph: Graph) -> tuple[InputEdge, ...]:
    order = {relation: index for index, relation in enumerate(graph.relations)}
    keys = sorted(grouped, key=lambda key: (order.get(key[0], len(order)), key[1]))
    return tuple(InputEdge(relation, column, _sorted_transformations(grouped[(relation, column)])) for relation, column in keys)


def _sorted_transformations(items: list[Transformation]) -> tuple[Transformation, ...]:
    unique = set(items)
    return tuple(sorted(unique, key=lambda item: (item.type, item.subtype, item.description, item.masking)))
