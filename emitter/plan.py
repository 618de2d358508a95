"""A small immutable model of Spark's optimized logical plan, parsed from `TreeNode.toJSON()`.

Spark serializes a tree as a pre-order list of node objects; each carries its `class`,
`num-children` and its own constructor fields. Expression-valued fields hold nested pre-order
lists of the same shape. A plan node's child fields ("child", "left", "right") are indexes into
its children, and those children follow it in the list.

Spark drops what it cannot serialize (relations, file indexes) as `null`; the listener fetches
those through py4j and keys them by `leaf_key(node)` — the expr id of the leaf's first output
attribute, which is the same on both sides of the boundary.

Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import orjson
from attrs import field, frozen

ATTRIBUTE_CLASSES = frozenset({"AttributeReference", "PrettyAttribute"})
SUBQUERY_PLAN_FIELD = "plan"
OUTER_REFERENCE_FIELD = "e"


class PlanError(ValueError):
    """The plan JSON is not a Spark TreeNode list."""


class Attribute(NamedTuple):
    """One output column of a plan node, identified across the plan by its Catalyst expr id.

    A NamedTuple, like `Expr`: a TPC-DS plan declares hundreds of these."""

    expr_id: int
    name: str
    data_type: str


class Expr(NamedTuple):
    """One Catalyst expression: simple class name, children in order, raw JSON fields.

    `subplan` is the nested plan of a subquery expression (ScalarSubquery, Exists, ListQuery...).
    A NamedTuple rather than an attrs class: TPC-DS plans hold tens of thousands of these.
    """

    cls: str
    children: tuple[Expr, ...]
    fields: Mapping[str, Any]
    full_class: str = ""
    subplan: Node | None = None

    @property
    def expr_id(self) -> int | None:
        return expr_id_of(self.fields)

    @property
    def name(self) -> str | None:
        name = self.fields.get("name")
        return name if isinstance(name, str) else None

    def attribute(self) -> Attribute | None:
        """The attribute this expression declares (AttributeReference, Alias...), if any."""
        if self.cls == "Alias":
            data_type = self.children[0].fields.get("dataType") if self.children else None
        else:
            data_type = self.fields.get("dataType")
        return _declared_attribute(self.fields, data_type)

    def field_expr(self, name: str) -> Any:
        """A field of this expression parsed into Expr/Node trees (fields are kept raw)."""
        return parse_value(self.fields.get(name))

    def walk(self) -> Iterator[Expr]:
        """Pre-order, without recursion (expression trees can be thousands deep)."""
        stack: list[Expr] = [self]
        while stack:
            expr = stack.pop()
            yield expr
            stack.extend(reversed(expr.children))


@frozen(eq=False)
class Node:
    """One logical plan node. Equality is identity, so nodes can key dicts."""

    cls: str
    children: tuple[Node, ...]
    output: tuple[Attribute, ...]
    fields: Mapping[str, Any] = field(repr=False)
    exprs: Mapping[str, Any] = field(repr=False)
    full_class: str = field(default="", repr=False)

    def walk(self) -> Iterator[Node]:
        """Pre-order, without recursion."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def expr_list(self, name: str) -> tuple[Expr, ...]:
        """An expression-sequence field (projectList, aggregateExpressions...) as a flat tuple."""
        value = self.exprs.get(name)
        if isinstance(value, Expr):
            return (value,)
        if isinstance(value, tuple):
            return tuple(item for item in value if isinstance(item, Expr))
        return ()

    def expr(self, name: str) -> Expr | None:
        value = self.exprs.get(name)
        return value if isinstance(value, Expr) else None


def parse_plan(plan_json: str | list[dict[str, Any]]) -> Node:
    """Parse `optimizedPlan().toJSON()` (text or already-decoded list) into a Node tree."""
    items = _decode(plan_json) if isinstance(plan_json, str) else plan_json
    if not isinstance(items, list) or not items or not _is_tree_item(items[0]):
        raise PlanError("plan JSON must be a non-empty list of TreeNode objects")
    node, consumed = _build_node(items, 0)
    if consumed != len(items):
        raise PlanError(f"plan JSON has {len(items) - consumed} trailing nodes after the root")
    return node


def _decode(text: str) -> Any:
    """orjson: about twice as fast as json on plan JSON, half of the parse; json only for what
    orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def leaf_key(node: Node) -> int | None:
    """The expr id of a leaf relation's first output attribute: its identity across py4j."""
    if node.children or not node.output:
        return None
    return node.output[0].expr_id


def table_identifier(node: Node) -> str | None:
    """`database.table` (or `catalog.namespace.table` for V2) named in a relation's JSON."""
    catalog_table = node.fields.get("catalogTable") or node.fields.get("tableMeta")
    if isinstance(catalog_table, dict):
        return _table_identifier_name(catalog_table.get("identifier"))
    identifier = node.fields.get("identifier")
    if isinstance(identifier, dict):
        names = [*identifier.get("namespace", []), identifier.get("name")]
        return ".".join(str(name) for name in names if name)
    relation = node.exprs.get("relation")
    if isinstance(relation, Node):
        return table_identifier(relation)
    return None


def _table_identifier_name(identifier: Any) -> str | None:
    if not isinstance(identifier, dict) or not identifier.get("table"):
        return None
    parts = [identifier.get("database"), identifier["table"]]
    return ".".join(part for part in parts if part)


@lru_cache(maxsize=4096)  # a few hundred distinct classes, tens of thousands of calls per plan
def simple_class(full_class: str) -> str:
    return full_class.rsplit(".", 1)[-1].rstrip("$")


def expr_id_of(fields: Mapping[str, Any]) -> int | None:
    expr_id = fields.get("exprId")
    found = expr_id.get("id") if isinstance(expr_id, dict) else None
    return found if isinstance(found, int) else None


def render_type(data_type: Any) -> str:
    """Spark's JSON data type as catalog-string-like text (`int`, `array<string>`...)."""
    if data_type is None:
        return ""
    if isinstance(data_type, str):
        return data_type
    if isinstance(data_type, dict):
        kind = data_type.get("type")
        if kind == "struct":
            inner = ",".join(f"{field.get('name')}:{render_type(field.get('type'))}" for field in data_type.get("fields", []))
            return f"struct<{inner}>"
        if kind == "array":
            return f"array<{render_type(data_type.get('elementType'))}>"
        if kind == "map":
            key = render_type(data_type.get("keyType"))
            return f"map<{key},{render_type(data_type.get('valueType'))}>"
        if kind == "udt":
            return str(data_type.get("class", "udt"))
    return json.dumps(data_type, sort_keys=True)


def parse_value(value: Any) -> Any:
    """A JSON field value with every nested TreeNode list turned into an Expr or Node."""
    if isinstance(value, list):
        if value and _is_tree_item(value[0]):
            return _parse_tree(value)
        return tuple([parse_value(item) for item in value])
    return value


def parse_expression_list(value: Any) -> tuple[Expr, ...]:
    """A field holding a list of expression trees, each parsed as an Expr whatever its classes'
    package (MergeRows' instructions are `plans.logical` classes over expressions)."""
    if not isinstance(value, list):
        return ()
    return tuple(_build_expr(items, 0)[0] for items in value if isinstance(items, list) and items and _is_tree_item(items[0]))


def _is_tree_item(item: Any) -> bool:
    return isinstance(item, dict) and "class" in item and "num-children" in item


def _is_plan_class(full_class: str) -> bool:
    return ".plans.logical." in full_class or (".execution." in full_class and ".expressions." not in full_class)


def _parse_tree(items: list[dict[str, Any]]) -> Expr | Node:
    if _is_plan_class(items[0]["class"]):
        return _build_node(items, 0)[0]
    return _build_expr(items, 0)[0]


def _build_expr(items: list[dict[str, Any]], position: int) -> tuple[Expr, int]:
    if position == 0:
        built = _build_whole(items, _make_expr)
        if built is not None:
            return built, len(items)
    return _build_tree(items, position, _make_expr)


def _build_node(items: list[dict[str, Any]], position: int) -> tuple[Node, int]:
    if position == 0:
        built = _build_whole(items, _make_node)
        if built is not None:
            return built, len(items)
    return _build_tree(items, position, _make_node)


def _build_whole(items: list[dict[str, Any]], make: Callable[[dict[str, Any], tuple[Any, ...]], Any]) -> Any | None:
    """The one tree `items` holds, built from the last item to the first: when an item is reached
    its children are already built, on top of the stack, the first child topmost. No per-item
    bookkeeping, so this is the fast path; None when `items` is not exactly one well-formed tree
    (trailing or missing nodes, an item that is no TreeNode): `_build_tree` then reads it in
    order and says what is wrong (or builds the first tree of a field list with more)."""
    stack: list[Any] = []
    append = stack.append
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.__class__ is not dict or "class" not in item:
            return None
        count = item.get("num-children")
        if count.__class__ is not int:
            return None
        if count:
            if count > len(stack) or count < 0:
                return None
            children = tuple(stack[-1 : -count - 1 : -1])
            del stack[-count:]
            append(make(item, children))
        else:
            append(make(item, ()))
    return stack[0] if len(stack) == 1 else None


def _build_tree(
    items: list[dict[str, Any]], position: int, make: Callable[[dict[str, Any], tuple[Any, ...]], Any]
) -> tuple[Any, int]:
    """Rebuild the tree rooted at `items[position]` from Spark's pre-order list, iteratively.

    Each open entry is [item, children still expected, children built so far].
    """
    if position >= len(items):
        raise PlanError("plan JSON ends before all children were read")
    open_entries: list[list[Any]] = []
    while True:
        if position >= len(items):
            raise PlanError("plan JSON ends before all children were read")
        item = items[position]
        if not _is_tree_item(item):
            raise PlanError(f"plan JSON item {position} is not a TreeNode object")
        position += 1
        open_entries.append([item, int(item.get("num-children", 0)), []])
        while open_entries and open_entries[-1][1] == len(open_entries[-1][2]):
            finished_item, _, children = open_entries.pop()
            built = make(finished_item, tuple(children))
            if not open_entries:
                return built, position
            open_entries[-1][2].append(built)


def _make_expr(item: dict[str, Any], children: tuple[Expr, ...]) -> Expr:
    subplan = None
    nested = item.get(SUBQUERY_PLAN_FIELD)
    if isinstance(nested, list) and nested and _is_tree_item(nested[0]):
        parsed = _parse_tree(nested)
        subplan = parsed if isinstance(parsed, Node) else None
    full_class = item["class"]
    return Expr(simple_class(full_class), children, item, full_class, subplan)


def _make_node(item: dict[str, Any], children: tuple[Node, ...]) -> Node:
    full_class = item["class"]
    cls = simple_class(full_class)
    parsed: dict[str, Any] = {}
    deferred: dict[str, list[Any]] = {}
    for name, value in item.items():
        if value.__class__ is list and name != "class" and name != "num-children":
            if name == DECLARED_OUTPUT_FIELD and _is_flat_attribute_list(value):
                deferred[name] = value
            else:
                parsed[name] = parse_value(value)
    exprs = _Fields(parsed, deferred) if deferred else parsed
    output = _output(cls, item, exprs, children)
    return Node(cls, children, output, item, exprs, full_class)


DECLARED_OUTPUT_FIELD = "output"
_MISSING = object()


class _Fields(Mapping[str, Any]):
    """A node's expression fields, parsed when built, except its declared `output` when that is
    a plain list of attributes: a leaf relation's, every column of its table, which the lineage
    reads only as the node's output (taken from the JSON directly, `_flat_attributes`). That
    one is parsed into Exprs when first read."""

    __slots__ = ("_parsed", "_deferred")

    def __init__(self, parsed: dict[str, Any], deferred: dict[str, list[Any]]) -> None:
        self._parsed = parsed
        self._deferred = deferred

    def __getitem__(self, name: str) -> Any:
        value = self._parsed.get(name, _MISSING)
        if value is not _MISSING:
            return value
        raw = self._deferred.get(name, _MISSING)
        if raw is _MISSING:
            raise KeyError(name)
        value = self._parsed[name] = parse_value(raw)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        value = self._parsed.get(name, _MISSING)
        if value is not _MISSING:
            return value
        return self[name] if name in self._deferred else default

    def __contains__(self, name: object) -> bool:
        return name in self._parsed or name in self._deferred

    def __iter__(self) -> Iterator[str]:
        yield from self._parsed
        yield from (name for name in self._deferred if name not in self._parsed)

    def __len__(self) -> int:
        return len(self._parsed) + sum(1 for name in self._deferred if name not in self._parsed)


def _is_flat_attribute_list(value: list[Any]) -> bool:
    """Whether a field is a list of one-item trees (attributes without children), which
    `_flat_attributes` reads exactly as `_attributes(parse_value(value))` would."""
    for tree in value:
        if tree.__class__ is not list or len(tree) != 1:
            return False
        item = tree[0]
        if item.__class__ is not dict or item.get("num-children") != 0 or "class" not in item:
            return False
        if _is_plan_class(item["class"]):
            return False
    return True


def _flat_attributes(value: list[list[dict[str, Any]]]) -> tuple[Attribute, ...]:
    """The attributes a flat attribute list (`_is_flat_attribute_list`) declares, from its JSON."""
    found = []
    for (item,) in value:
        attribute = _declared_attribute(item, None if simple_class(item["class"]) == "Alias" else item.get("dataType"))
        if attribute:
            found.append(attribute)
    return tuple(found)


def _declared_attribute(fields: Mapping[str, Any], data_type: Any) -> Attribute | None:
    """The attribute an expression's JSON fields declare (its exprId and name), of `data_type`
    (rendered unless it is a type name already); None when they declare none."""
    expr_id = fields.get("exprId")
    expr_id = expr_id.get("id") if isinstance(expr_id, dict) else None
    name = fields.get("name")
    if not isinstance(expr_id, int) or not isinstance(name, str):
        return None
    return Attribute(expr_id, name, data_type if isinstance(data_type, str) else render_type(data_type))


def _attributes(values: Any) -> tuple[Attribute, ...]:
    """Attributes declared by a sequence of named expressions (or a nested sequence)."""
    if isinstance(values, Expr):
        attribute = values.attribute()
        return (attribute,) if attribute else ()
    if isinstance(values, tuple):
        found: list[Attribute] = []
        for value in values:
            if isinstance(value, Expr):
                attribute = value.attribute()
                if attribute:
                    found.append(attribute)
            else:
                found.extend(_attributes(value))
        return tuple(found)
    return ()


def _children_output(children: Sequence[Node]) -> tuple[Attribute, ...]:
    return tuple(attr for child in children for attr in child.output)


def _join_output(item: Mapping[str, Any], exprs: Mapping[str, Any], children: tuple[Node, ...]) -> tuple[Attribute, ...]:
    join_type = item.get("joinType")
    name = ""
    if isinstance(join_type, dict):
        name = simple_class(str(join_type.get("object") or join_type.get("product-class") or ""))
    left = children[0].output if children else ()
    if name in ("LeftSemi", "LeftAnti"):
        return left
    if name == "ExistenceJoin" and isinstance(join_type, dict):
        return left + _attributes(parse_value(join_type.get("exists")))
    return _children_output(children)


def _output(cls: str, item: Mapping[str, Any], exprs: Mapping[str, Any], children: tuple[Node, ...]) -> tuple[Attribute, ...]:
    first_child = children[0].output if children else ()
    if cls == "Project":
        return _attributes(exprs.get("projectList"))
    if cls == "Aggregate":
        return _attributes(exprs.get("aggregateExpressions"))
    if cls == "Window":
        return first_child + _attributes(exprs.get("windowExpressions"))
    if cls == "Join":
        return _join_output(item, exprs, children)
    if cls in ("Union", "Intersect", "Except"):
        return first_child
    if cls == "Generate":
        required = _attributes(exprs.get("requiredChildOutput")) if "requiredChildOutput" in exprs else first_child
        unrequired = item.get("unrequiredChildIndex")
        if "requiredChildOutput" not in exprs and isinstance(unrequired, list) and unrequired:
            required = tuple(attr for index, attr in enumerate(first_child) if index not in set(unrequired))
        return required + _attributes(exprs.get("generatorOutput"))
    if cls in ("BatchEvalPython", "ArrowEvalPython", "BatchEvalPythonUDTF", "ArrowEvalPythonUDTF"):
        base = _attributes(exprs["requiredChildOutput"]) if "requiredChildOutput" in exprs else first_child
        return base + _attributes(exprs.get("resultAttrs"))
    if cls == "WithCTE":
        return children[-1].output if children else ()
    if cls == "CTERelationDef":
        return first_child
    if isinstance(exprs, _Fields) and DECLARED_OUTPUT_FIELD in exprs._deferred:
        declared = _flat_attributes(exprs._deferred[DECLARED_OUTPUT_FIELD])
    else:
        declared = _attributes(exprs.get(DECLARED_OUTPUT_FIELD))
    if declared or "output" in item:
        return declared
    if cls in ("Expand",):
        return declared
    return _children_output(children) if len(children) != 1 else first_child
