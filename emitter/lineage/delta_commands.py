"""Delta Lake's row-level commands (`MergeIntoCommand`, `UpdateCommand`, `DeleteCommand`) as the
row-level plan `emitter.lineage.row_level` reads — pure, over `emitter.plan`.

Delta runs `MERGE INTO`, `UPDATE` and `DELETE` as commands of its own: the plan the listener sees
is the command alone, its target (and a MERGE's source) analyzed plans held in its fields, its
clauses as expressions (a `DeltaMergeInto...Clause` with its condition and one `DeltaMergeAction`
per target column it assigns). `as_row_level(root)` rewrites such a command into the plan Spark
builds for the same statement on a V2 table, so `row_level`'s rules apply unchanged and both
formats answer identically:

- MERGE: `ReplaceData(table = target, condition = ON)` over `MergeRows` over the join of the
  target (with Spark's `__row_from_target` marker) and the source; each update or insert clause a
  `Keep` of its condition and its values in the target's column order (a column an insert does not
  name: a null), each delete clause a `Discard`;
- UPDATE: `ReplaceData(table = target, condition = WHERE)` over a `Project` of the target that
  takes `if(WHERE, SET value, column)` for each assigned column (Spark's copy-on-write UPDATE);
- DELETE: `ReplaceData(table = target, condition = WHERE)` over the target.

It is a rewrite of the plan's JSON (the command's fields are the raw TreeNode lists), parsed by
`emitter.plan`. A command of another shape (no target plan, clauses of unknown classes) gives None:
the caller then degrades to the target's own columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import count
from typing import Any

from emitter.lineage.row_level import TARGET_MARKER
from emitter.plan import Expr, Node, PlanError, parse_expression_list, parse_plan

DELTA_PACKAGE = "org.apache.spark.sql.delta."
DELTA_COMMANDS = frozenset({"MergeIntoCommand", "UpdateCommand", "DeleteCommand"})
LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
# Delta's clause classes: whether one keeps a row with new values (an update or an insert) or drops it
KEEPING_CLAUSES = frozenset(
    {
        "DeltaMergeIntoMatchedUpdateClause",
        "DeltaMergeIntoNotMatchedInsertClause",
        "DeltaMergeIntoNotMatchedBySourceUpdateClause",
    }
)
DELETING_CLAUSES = frozenset({"DeltaMergeIntoMatchedDeleteClause", "DeltaMergeIntoNotMatchedBySourceDeleteClause"})
# Delta's clause lists and the MergeRows instruction lists they become
CLAUSE_LISTS = (
    ("matchedClauses", "matchedInstructions"),
    ("notMatchedClauses", "notMatchedInstructions"),
    ("notMatchedBySourceClauses", "notMatchedBySourceInstructions"),
)
Items = list[dict[str, Any]]


def is_delta_command(root: Node) -> bool:
    return root.cls in DELTA_COMMANDS and root.full_class.startswith(DELTA_PACKAGE)


def target_plan(root: Node) -> Node | None:
    """The command's target (its analyzed plan), None when the JSON holds none."""
    target = root.exprs.get("target")
    return target if isinstance(target, Node) and target.output else None


def as_row_level(root: Node) -> Node | None:
    """The `ReplaceData` plan of a Delta row-level command (see the module's docstring); None for
    any other node or a shape this does not know."""
    if not is_delta_command(root):
        return None
    target = root.fields.get("target")
    if target_plan(root) is None or not isinstance(target, list):
        return None
    try:
        if root.cls == "MergeIntoCommand":
            items = _merge(root, target)
        elif root.cls == "UpdateCommand":
            items = _update(root, target)
        else:
            items = _replace_data(target, _condition(root), list(target))
        return None if items is None else parse_plan(items)
    except (PlanError, KeyError, IndexError, TypeError, ValueError):
        return None


def _replace_data(target: Items, condition: Items | None, query: Items) -> Items:
    item: dict[str, Any] = {"class": LOGICAL + "ReplaceData", "num-children": 1, "table": target, "query": 0}
    if condition is not None:
        item["condition"] = condition
    return [item, *query]


def _condition(root: Node) -> Items | None:
    condition = root.fields.get("condition")
    return condition if isinstance(condition, list) and condition else None


# ---- UPDATE -----------------------------------------------------------------------------------
def _update(root: Node, target: Items) -> Items | None:
    """A Project of the target: each column its SET value under the WHERE (`if(WHERE, value,
    column)`), or the column itself when the statement leaves it alone."""
    columns = _attribute_items(target)
    values = root.fields.get("updateExpressions")
    if columns is None or not isinstance(values, list) or len(values) != len(columns):
        return None
    condition = _condition(root)
    fresh = _fresh_ids(target)
    project_list: list[Items] = []
    for column, value in zip(columns, values, strict=True):
        if not isinstance(value, list) or not value:
            return None
        if _same_attribute(value, column):
            project_list.append([column])
            continue
        assigned = value if condition is None else _if(condition, value, [column])
        project_list.append(_alias(assigned, str(column["name"]), next(fresh)))
    project = {"class": LOGICAL + "Project", "num-children": 1, "projectList": project_list, "child": 0}
    return _replace_data(target, condition, [project, *target])


def _if(condition: Items, value: Items, otherwise: Items) -> Items:
    head = {"class": EXPRESSIONS + "If", "num-children": 3, "predicate": 0, "trueValue": 1, "falseValue": 2}
    return [head, *condition, *value, *otherwise]


def _alias(value: Items, name: str, expr_id: int) -> Items:
    return [{"class": EXPRESSIONS + "Alias", "num-children": 1, "child": 0, "name": name, "exprId": {"id": expr_id}}, *value]


def _same_attribute(value: Items, column: Mapping[str, Any]) -> bool:
    return len(value) == 1 and _is_attribute(value[0]) and value[0].get("exprId") == column.get("exprId")


# ---- MERGE ------------------------------------------------------------------------------------
def _merge(root: Node, target: Items) -> Items | None:
    """MergeRows over the join of the marked target and the source, one instruction per clause."""
    source = root.fields.get("source")
    columns = _attribute_items(target)
    condition = _condition(root)
    if columns is None or not isinstance(source, list) or not source or condition is None:
        return None
    fresh = _fresh_ids(target, source)
    names = [str(column["name"]).lower() for column in columns]
    merge_rows: dict[str, Any] = {"class": LOGICAL + "MergeRows", "num-children": 1, "child": 0}
    present = set()
    for clause_list, instruction_list in CLAUSE_LISTS:
        instructions = []
        for clause in parse_expression_list(root.fields.get(clause_list)):
            instruction = _instruction(clause, names, columns)
            if instruction is None:
                return None
            instructions.append(instruction)
        merge_rows[instruction_list] = instructions
        if instructions:
            present.add(clause_list)
    merge_rows["output"] = [
        [{**_attribute_head(column), "exprId": {"id": next(fresh)}, "name": column["name"]}] for column in columns
    ]
    join = {
        "class": LOGICAL + "Join",
        "num-children": 2,
        "left": 0,
        "right": 1,
        "joinType": {"object": f"org.apache.spark.sql.catalyst.plans.{_join_type(present)}$"},
        "condition": condition,
    }
    marked = {
        "class": LOGICAL + "Project",
        "num-children": 1,
        "projectList": [*([column] for column in columns), _alias(_true(), TARGET_MARKER, next(fresh))],
        "child": 0,
    }
    return _replace_data(target, condition, [merge_rows, join, marked, *target, *source])


def _join_type(present: set[str]) -> str:
    """The join Spark would plan: outer on the side whose unmatched rows a clause acts on."""
    unmatched_source = "notMatchedClauses" in present
    unmatched_target = "notMatchedBySourceClauses" in present
    if unmatched_source and unmatched_target:
        return "FullOuter"
    if unmatched_source:
        return "RightOuter"
    return "LeftOuter" if unmatched_target else "Inner"


def _instruction(clause: Expr, names: Sequence[str], columns: Sequence[Mapping[str, Any]]) -> Items | None:
    """A Delta clause as a MergeRows `Keep` (its condition, then its value of each target column)
    or `Discard` (its condition); None for a clause class this does not know."""
    kind = clause.cls
    condition_field = clause.fields.get("condition")
    has_condition = isinstance(condition_field, list) and bool(condition_field) and bool(clause.children)
    condition = _items(clause.children[0]) if has_condition else _true()
    if kind in DELETING_CLAUSES:
        return [{"class": LOGICAL + "MergeRows$Discard", "num-children": 1, "condition": 0}, *condition]
    if kind not in KEEPING_CLAUSES:
        return None
    assigned = _assignments(clause)
    if assigned is None:
        return None
    values = [assigned.get(name) or _null(columns[index]) for index, name in enumerate(names)]
    head = {
        "class": LOGICAL + "MergeRows$Keep",
        "num-children": 1 + len(values),
        "condition": 0,
        "output": list(range(1, 1 + len(values))),
    }
    return [head, *condition, *(item for value in values for item in value)]


def _assignments(clause: Expr) -> dict[str, Items] | None:
    """Target column (lower case) -> the JSON of the value a clause's actions assign it; a nested
    field's assignment counts for its top-level column."""
    indexes = clause.fields.get("actions")
    if not isinstance(indexes, list):
        return None
    found: dict[str, Items] = {}
    for index in indexes:
        if not isinstance(index, int) or index >= len(clause.children):
            return None
        action = clause.children[index]
        parts = str(action.fields.get("targetColNameParts") or "").strip("[]").split(",")
        if action.cls != "DeltaMergeAction" or not action.children or not parts[0].strip():
            return None
        found.setdefault(parts[0].strip().strip("`").lower(), _items(action.children[0]))
    return found


# ---- JSON items -------------------------------------------------------------------------------
def _items(expr: Expr) -> Items:
    """An expression back as its pre-order JSON items (each node's raw fields)."""
    return [dict(node.fields) for node in expr.walk()]


def _attribute_items(plan: Items) -> list[dict[str, Any]] | None:
    """The attributes of a plan's root's output, as JSON items (None when it is not known)."""
    root = parse_plan(plan)
    by_id: dict[int, dict[str, Any]] = {}
    for item in _all_items(plan):
        expr_id = item.get("exprId")
        if _is_attribute(item) and isinstance(expr_id, dict) and isinstance(expr_id.get("id"), int):
            by_id.setdefault(expr_id["id"], item)
    found = [by_id.get(attribute.expr_id) for attribute in root.output]
    return None if not found or any(item is None for item in found) else [item for item in found if item is not None]


def _all_items(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            yield current
            stack.extend(item for item in current.values() if isinstance(item, list | dict))


def _is_attribute(item: Mapping[str, Any]) -> bool:
    return str(item.get("class", "")).endswith(".AttributeReference")


def _attribute_head(column: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in column.items() if key in ("class", "num-children", "dataType", "nullable")}


def _true() -> Items:
    return [{"class": EXPRESSIONS + "Literal", "num-children": 0, "value": "true", "dataType": "boolean"}]


def _null(column: Mapping[str, Any]) -> Items:
    return [{"class": EXPRESSIONS + "Literal", "num-children": 0, "value": None, "dataType": column.get("dataType")}]


def _fresh_ids(*plans: Items) -> Iterator[int]:
    """Expr ids for the columns the rewrite declares, below every id of the plans (negative)."""
    ids = [
        item["exprId"]["id"]
        for plan in plans
        for item in _all_items(plan)
        if isinstance(item.get("exprId"), dict) and isinstance(item["exprId"].get("id"), int)
    ]
    return count(min([0, *ids]) - 1, -1)
