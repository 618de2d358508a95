"""Row-level commands (`MERGE INTO`, `UPDATE`, `DELETE`) on V2 tables — pure, over `emitter.plan`.

Spark rewrites them into a write of the table they read: `ReplaceData` (copy-on-write: the files
holding touched rows are rewritten, untouched rows carried over) or `WriteDelta` (merge-on-read:
only the changed rows and delete markers are written), over a query that joins the target with the
source and applies the clauses (`MergeRows`), or projects the updated rows (`UPDATE`), or filters
the deleted ones (`DELETE`). The lineage is that of the statement, the same in both modes:

- `merge_rows` (the `MergeRows` handler of `graph.HANDLERS`): each output column from each clause
  that keeps a row (an update's SET expression, an insert's VALUES, a carried-over row's own
  column); a MATCHED / NOT MATCHED BY SOURCE clause's condition is INDIRECT/CONDITIONAL on the
  columns that clause assigns; the condition of a clause that decides whether a row exists (a
  DELETE clause, an INSERT clause) is a dataset-level FILTER. The ON condition is the join's JOIN.
- `refine`: every column of the target keeps its value in the rows the command does not touch, so
  each output column is also DIRECT/IDENTITY from the target's column of that name (merge-on-read
  plans do not even read it); an `UPDATE` / `DELETE`'s WHERE condition is the FILTER (as the
  statement wrote it, not the negation a copy-on-write plan keeps); what the rewrite adds and the
  user never wrote is dropped: the table format's metadata columns (`_file`, `_pos`, ...), the
  runtime filter selecting the files to rewrite (`dynamicpruningexpression(...)`), and the filters
  of the subquery behind it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from attrs import evolve, frozen

from emitter.lineage.dependencies import Role, references
from emitter.lineage.model import (
    CONDITIONAL,
    DIRECT,
    FILTER,
    IDENTITY,
    INDIRECT,
    ColumnLineage,
    InputEdge,
    Transformation,
)
from emitter.plan import Attribute, Expr, Node, parse_expression_list

if TYPE_CHECKING:
    from emitter.lineage.graph import Graph

ROW_LEVEL_COMMANDS = frozenset({"ReplaceData", "WriteDelta"})
# Columns a row-level rewrite reads or writes that are no column of the table: Iceberg's metadata
# columns, Spark's markers of the joined sides and of each written row's operation.
METADATA_COLUMNS = frozenset(
    {
        "_file",
        "_pos",
        "_spec_id",
        "_partition",
        "_deleted",
        "_row_id",
        "_last_updated_sequence_number",
        "__row_operation",
        "__row_id",
        "__row_from_target",
        "__row_from_source",
    }
)
TARGET_MARKER = "__row_from_target"
ROW_OPERATION = "__row_operation"
DELETE_OPERATION = "1"  # RowDeltaUtils.DELETE_OPERATION
RUNTIME_FILTER_TEXT = "dynamicpruningexpression("
REWRITE_ONLY = "\0rewrite"  # the description of a filter the rewrite added, left out by `refine`
V2_SCANS = frozenset({"DataSourceV2ScanRelation", "DataSourceV2Relation"})
# MergeRows' clause lists; whether a clause there decides which rows exist (FILTER) or which value
# a kept row's columns take (CONDITIONAL)
CLAUSE_LISTS = (
    ("matchedInstructions", False),
    ("notMatchedInstructions", True),
    ("notMatchedBySourceInstructions", False),
)


@frozen
class RowLevelCommand:
    """A `ReplaceData` / `WriteDelta` root: the query it writes, the table it reads and writes
    (its relation node and columns, by expr id) and its condition (the MERGE's ON, the WHERE of an
    UPDATE or DELETE)."""

    kind: str
    query: Node
    table: Node
    condition: Expr | None
    is_merge: bool

    @property
    def target_ids(self) -> frozenset[int]:
        return frozenset(attribute.expr_id for attribute in self.table.output)


def row_level_command(root: Node) -> RowLevelCommand | None:
    """The row-level command at `root`; None for any other node or a shape it does not know."""
    if root.cls not in ROW_LEVEL_COMMANDS or not root.children:
        return None
    table = root.exprs.get("table")
    if not isinstance(table, Node) or not table.output:
        return None
    query = root.children[0]
    return RowLevelCommand(
        kind=root.cls,
        query=query,
        table=table,
        condition=root.expr("condition"),
        is_merge=any(node.cls == "MergeRows" for node in query.walk()),
    )


def aligned(names: Sequence[str] | None, command: RowLevelCommand) -> dict[str, Attribute | None]:
    """Each column written (`names`, else the table's) and the query's column of that name: None
    when the query has none (a merge-on-read DELETE writes only delete markers)."""
    by_name = {attribute.name.lower(): attribute for attribute in command.query.output}
    written = list(names) if names is not None else [attribute.name for attribute in command.table.output]
    return {name: by_name.get(name.lower()) for name in written}


# ---- MergeRows ------------------------------------------------------------------------------
def merge_rows(node: Node, graph: Graph) -> None:
    """Each output column from each clause that keeps a row; clause conditions as CONDITIONAL
    (on the columns an update clause assigns) or FILTER (a DELETE or INSERT clause's)."""
    graph.declared.update(attribute.expr_id for attribute in node.output)
    target_ids = _target_side_ids(node)
    for list_name, decides_rows in CLAUSE_LISTS:
        for clause in parse_expression_list(node.fields.get(list_name)):
            _clause(node, clause, decides_rows, target_ids, graph)


def _clause(node: Node, clause: Expr, decides_rows: bool, target_ids: frozenset[int] | None, graph: Graph) -> None:
    kind = "Discard" if _writes_delete(node, clause) else clause.cls.rsplit("$", 1)[-1]
    condition = clause.children[0] if clause.children else None
    conditional = condition is not None and not _is_true(condition)
    if kind == "Discard" or (kind != "Discard" and decides_rows):
        if conditional and condition is not None:
            graph.add_dataset(condition, FILTER)
        if kind == "Discard":
            return
    for output in _outputs(clause):
        for target, item in zip(node.output, output, strict=False):
            if item.cls == "Literal" or target.name in METADATA_COLUMNS:
                continue
            graph.add_expression(target, item, inline=False)
            if conditional and condition is not None and not decides_rows and not _carried(target, item, target_ids):
                graph.add_expression(target, condition, Role(INDIRECT, CONDITIONAL), inline=False)


def _writes_delete(node: Node, clause: Expr) -> bool:
    """Whether a clause keeps only a delete marker (a merge-on-read DELETE clause: the row's
    `__row_operation` is Spark's DELETE_OPERATION)."""
    outputs = _outputs(clause)
    if len(outputs) != 1 or not node.output or node.output[0].name != ROW_OPERATION:
        return False
    operation = outputs[0][0] if outputs[0] else None
    return operation is not None and operation.cls == "Literal" and str(operation.fields.get("value")) == DELETE_OPERATION


def _outputs(clause: Expr) -> list[tuple[Expr, ...]]:
    """The rows a Keep (one) or Split (two: Spark 4's update as a delete and an insert) writes."""
    outputs = []
    for field_name in ("output", "otherOutput"):
        indexes = clause.fields.get(field_name)
        if isinstance(indexes, list):
            outputs.append(
                tuple(clause.children[index] for index in indexes if isinstance(index, int) and index < len(clause.children))
            )
    return outputs


def _carried(target: Attribute, item: Expr, target_ids: frozenset[int] | None) -> bool:
    """Whether a clause leaves the column as the target row has it (no assignment of its own)."""
    if item.cls != "AttributeReference" or (item.name or "").lower() != target.name.lower():
        return False
    return target_ids is None or item.expr_id in target_ids


def _target_side_ids(node: Node) -> frozenset[int] | None:
    """The columns of the joined target's side (the child carrying Spark's target marker), None when
    no side carries it (then a same-named column counts as the target's)."""
    join = node.children[0] if node.children else None
    while join is not None and join.cls != "Join" and len(join.children) == 1:
        join = join.children[0]
    if join is None or join.cls != "Join":
        return None
    for side in join.children:
        if any(attribute.name == TARGET_MARKER for attribute in side.output):
            return frozenset(attribute.expr_id for attribute in side.output)
    return None


def _is_true(expr: Expr) -> bool:
    return expr.cls == "Literal" and str(expr.fields.get("value")).lower() == "true"


# ---- the command ----------------------------------------------------------------------------
def add_command(command: RowLevelCommand, graph: Graph) -> None:
    """Before the walk: the target's columns as leaves of its scan (a merge-on-read plan may not
    read them); for an UPDATE / DELETE, its WHERE as the FILTER on the target (the copy-on-write
    plan's negated WHERE and Spark's inferred filters on the target left out), and a copy-on-write
    UPDATE's `if(WHERE, value, column)` as the value and the column (its WHERE is CONDITIONAL, as
    `refine` adds for either mode)."""
    target_leaf = _target_leaf(command, graph)
    if target_leaf is not None:
        for attribute in command.table.output:
            graph.leaves.setdefault(attribute.expr_id, (target_leaf, attribute.name))
    if command.condition is None or command.is_merge:
        return
    where = graph.text(command.condition)
    where_ids = {reference.expr_id for reference in references(command.condition, lambda _: None)}
    for index, (expr_id, step) in enumerate(graph.dataset):
        if step.subtype == FILTER and expr_id in command.target_ids:
            graph.dataset[index] = (expr_id, evolve(step, description=where if expr_id in where_ids else REWRITE_ONLY))
    graph.add_dataset(command.condition, FILTER, where)
    _split_updates(command.query, command.condition, graph)


def _split_updates(query: Node, condition: Expr, graph: Graph) -> None:
    """A copy-on-write UPDATE projects each assigned column as `if(WHERE, value, column)`: its
    edges become those of the value and of the column."""
    for node in query.walk():
        if node.cls != "Project":
            continue
        for item in node.expr_list("projectList"):
            attribute = item.attribute()
            value = item.children[0] if item.cls == "Alias" and item.children else None
            if attribute is None or value is None or value.cls != "If" or len(value.children) != 3:
                continue
            if value.children[0] != condition:
                continue
            graph.edges.pop(attribute.expr_id, None)
            graph.definitions.pop(attribute.expr_id, None)
            for branch in value.children[1:]:
                graph.add_expression(attribute, branch, inline=False)


def refine(command: RowLevelCommand, result: ColumnLineage, graph: Graph) -> ColumnLineage:
    """After the walk: each output column also IDENTITY from the target's own column; an UPDATE's
    assigned columns CONDITIONAL on its WHERE; the rewrite's own inputs (metadata columns, the
    runtime file filter and the target's scans in its subquery) left out."""
    target_leaf = _target_leaf(command, graph)
    targets = _target_relations(command, result.relations)
    columns = {name: edges for name, edges in result.columns.items() if name not in METADATA_COLUMNS}
    if target_leaf is not None:
        by_name = {attribute.name.lower(): attribute.name for attribute in command.table.output}
        for name, edges in columns.items():
            column = by_name.get(name.lower())
            if column is None:
                continue
            if command.condition is not None and not command.is_merge and _assigned(edges, targets, column):
                edges = _with_conditions(edges, command.condition, graph)
            columns[name] = _with_identity(edges, target_leaf, column)
    columns = {name: tuple(_kept_edges(edges, targets)) for name, edges in columns.items()}
    return evolve(result, columns=columns, dataset=tuple(_kept_edges(result.dataset, targets)))


def _assigned(edges: tuple[InputEdge, ...], targets: Mapping[int, bool], column: str) -> bool:
    """Whether a column takes any value but its own (an UPDATE's SET assigns it)."""
    return any(
        not (id(edge.relation) in targets and edge.column.lower() == column.lower() and t.subtype == IDENTITY)
        for edge in edges
        for t in edge.transformations
        if t.type == DIRECT
    )


def _with_conditions(edges: tuple[InputEdge, ...], condition: Expr, graph: Graph) -> tuple[InputEdge, ...]:
    """`edges` and INDIRECT/CONDITIONAL from each column `condition` reads."""
    text = graph.text(condition)
    step = Transformation(INDIRECT, CONDITIONAL, text)
    merged = list(edges)
    for reference in references(condition, lambda _: None):
        leaf = graph.leaves.get(reference.expr_id)
        if leaf is None:
            continue
        relation, column = leaf
        merged = _merged(merged, relation, column, step)
    return tuple(merged)


def _merged(edges: list[InputEdge], relation: Node, column: str, step: Transformation) -> list[InputEdge]:
    for index, edge in enumerate(edges):
        if edge.relation is relation and edge.column == column:
            if step not in edge.transformations:
                edges[index] = InputEdge(relation, column, (*edge.transformations, step))
            return edges
    return [*edges, InputEdge(relation, column, (step,))]


def _kept_edges(edges: Iterable[InputEdge], targets: Mapping[int, bool]) -> Iterable[InputEdge]:
    """`edges` without the rewrite's own: metadata columns, the runtime file filter, the target's
    scans inside it (`targets`: id(relation) -> whether it is such a scan), the target's filters
    that are not the statement's."""
    for edge in edges:
        if edge.column in METADATA_COLUMNS or targets.get(id(edge.relation)):
            continue
        kept = tuple(
            transformation
            for transformation in edge.transformations
            if not transformation.description.startswith(RUNTIME_FILTER_TEXT) and transformation.description != REWRITE_ONLY
        )
        if kept:
            yield InputEdge(edge.relation, edge.column, kept)


def _with_identity(edges: tuple[InputEdge, ...], target_leaf: Node, column: str) -> tuple[InputEdge, ...]:
    return tuple(_merged(list(edges), target_leaf, column, Transformation(DIRECT, IDENTITY)))


def _target_leaf(command: RowLevelCommand, graph: Graph) -> Node | None:
    """The scan of the target the command's query reads (it shares the table's expr ids)."""
    ids = command.target_ids
    for relation in graph.relations:
        if any(attribute.expr_id in ids for attribute in relation.output):
            return relation
    return None


def _target_relations(command: RowLevelCommand, relations: Iterable[Node]) -> dict[int, bool]:
    """id(relation) -> True for a scan of the target inside the rewrite's runtime file filter (a V2
    scan of the table's columns and a metadata column, not the scan the query reads), False for the
    query's own scan of the target."""
    ids = command.target_ids
    names = {attribute.name.lower() for attribute in command.table.output}
    found: dict[int, bool] = {}
    for relation in relations:
        output = relation.output
        if any(attribute.expr_id in ids for attribute in output):
            found[id(relation)] = False
        elif (
            relation.cls in V2_SCANS
            and any(attribute.name in METADATA_COLUMNS for attribute in output)
            and all(attribute.name.lower() in names or attribute.name in METADATA_COLUMNS for attribute in output)
        ):
            found[id(relation)] = True
    return found
