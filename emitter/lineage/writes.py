"""Recognise write commands at the root of a plan and read their target from the JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from emitter.lineage import delta_commands
from emitter.lineage.row_level import row_level_command
from emitter.plan import Node, table_identifier

WRITE_COMMANDS = frozenset(
    {
        "InsertIntoHadoopFsRelationCommand",
        "CreateDataSourceTableAsSelectCommand",
        "InsertIntoHiveTable",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoDataSourceCommand",
        "InsertIntoDataSourceDirCommand",
        "InsertIntoHiveDirCommand",
        "SaveIntoDataSourceCommand",
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "ReplaceData",
        "WriteDelta",
        "CreateTableAsSelect",
        "ReplaceTableAsSelect",
        "WriteToDataSourceV2",
        "WriteToMicroBatchDataSource",
        "WriteToMicroBatchDataSourceV1",
        "WriteToStream",
        "WriteToDataSourceV2Relation",
        *delta_commands.DELTA_COMMANDS,
    }
)
APPEND_COMMANDS = frozenset({"AppendData", "WriteToDataSourceV2", "WriteToMicroBatchDataSource"})
OVERWRITE_COMMANDS = frozenset({"OverwriteByExpression", "OverwritePartitionsDynamic", "ReplaceTableAsSelect"})
CATALOG_TABLE_FIELDS = ("catalogTable", "table", "tableDesc")


@frozen
class WriteCommand:
    """What a write command's JSON tells: the query it writes and what it knows of the target.

    Paths, save modes and formats the JSON drops (null) are left None for py4j to fill.
    """

    kind: str
    query: Node
    output_columns: tuple[str, ...]
    partition_columns: tuple[str, ...] = ()
    table: str | None = None
    location: str | None = None
    mode: str | None = None
    format: str | None = None
    static_partitions: Mapping[str, str] = field(factory=dict)
    options: Mapping[str, str] = field(factory=dict)


def write_command(root: Node) -> WriteCommand | None:
    """The write at `root`, or None when `root` is not a write command. A row-level command
    (`ReplaceData`, `WriteDelta`) is its own query: its lineage needs the target it reads and
    writes (`emitter.lineage.row_level`); so is Delta's (`MergeIntoCommand`, `UpdateCommand`,
    `DeleteCommand`), rewritten into that shape (`delta_commands`), else (a shape the rewrite does
    not know) the target's own columns."""
    if root.cls not in WRITE_COMMANDS:
        return None
    if delta_commands.is_delta_command(root):
        return _delta_command(root)
    query = _query(root)
    if query is None:
        return None
    if row_level_command(root) is not None:
        return WriteCommand(kind=root.cls, query=root, output_columns=_output_columns(root, query), table=_table(root, None))
    catalog_table = _catalog_table(root)
    partition_columns = _partition_columns(root, catalog_table)
    return WriteCommand(
        kind=root.cls,
        query=_strip_planned_write(query, partition_columns),
        output_columns=_output_columns(root, query),
        partition_columns=partition_columns,
        table=_table(root, catalog_table),
        location=_location(root, catalog_table),
        mode=_mode(root),
        format=_format(root, catalog_table),
        static_partitions=_string_map(root.fields.get("staticPartitions") or root.fields.get("partition")),
        options=_string_map(root.fields.get("options") or root.fields.get("writeOptions")),
    )


def _delta_command(root: Node) -> WriteCommand | None:
    target = delta_commands.target_plan(root)
    if target is None:
        return None
    query = delta_commands.as_row_level(root) or target
    columns = tuple(attribute.name for attribute in target.output)
    return WriteCommand(kind=root.cls, query=query, output_columns=columns, table=_table(root, _catalog_table(root)))


def _query(root: Node) -> Node | None:
    query = root.exprs.get("query")
    if isinstance(query, Node):
        return query
    return root.children[-1] if root.children else None


def _strip_planned_write(query: Node, partition_columns: tuple[str, ...]) -> Node:
    """Drop WriteFiles and the local Sort Spark adds to cluster a partitioned write."""
    if query.cls == "WriteFiles" and query.children:
        query = query.children[0]
    if query.cls == "Sort" and query.fields.get("global") is False and query.children and partition_columns:
        ordered = {expr.name for order in query.expr_list("order") for expr in order.walk() if expr.name}
        if ordered and ordered <= set(partition_columns):
            query = query.children[0]
    return query


def _output_columns(root: Node, query: Node) -> tuple[str, ...]:
    names = root.fields.get("outputColumnNames")
    if isinstance(names, str) and names.startswith("[") and names.endswith("]"):
        parsed = _split_names(names[1:-1])
        if len(parsed) == len(query.output) or not query.output:
            return parsed
    if isinstance(names, list):
        return tuple(str(name) for name in names)
    table = root.exprs.get("table")
    if isinstance(table, Node) and len(table.output) == len(query.output):
        return tuple(attribute.name for attribute in table.output)
    return tuple(attribute.name for attribute in query.output)


def _split_names(text: str) -> tuple[str, ...]:
    """Spark prints the names as `[a, b, round(x, 2)]`: split on top-level commas only."""
    names: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char in "([<":
            depth += 1
        elif char in ")]>" and depth:
            depth -= 1
        if char == "," and depth == 0:
            names.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if "".join(current).strip():
        names.append("".join(current).strip())
    return tuple(names)


def _catalog_table(root: Node) -> dict[str, Any] | None:
    for name in CATALOG_TABLE_FIELDS:
        value = root.fields.get(name)
        if isinstance(value, dict) and "identifier" in value:
            return value
    return None


def _partition_columns(root: Node, catalog_table: dict[str, Any] | None) -> tuple[str, ...]:
    attributes = root.expr_list("partitionColumns")
    if attributes:
        return tuple(str(attr.name) for attr in attributes)
    if catalog_table and isinstance(catalog_table.get("partitionColumnNames"), list):
        return tuple(str(name) for name in catalog_table["partitionColumnNames"])
    return ()


def _table(root: Node, catalog_table: dict[str, Any] | None) -> str | None:
    if catalog_table is not None:
        identifier = catalog_table.get("identifier") or {}
        parts = [identifier.get("database"), identifier.get("table")]
        return ".".join(part for part in parts if part) or None
    target = root.exprs.get("table") or root.exprs.get("relation")
    if isinstance(target, Node):
        return table_identifier(target)
    for child in root.children[:-1]:
        name = table_identifier(child)
        if name:
            return name
    return None


def _location(root: Node, catalog_table: dict[str, Any] | None) -> str | None:
    storage = (catalog_table or {}).get("storage")
    location = storage.get("locationUri") if isinstance(storage, dict) else None
    if isinstance(location, str):
        return location
    path = root.fields.get("outputPath")
    return path if isinstance(path, str) else None


def _mode(root: Node) -> str | None:
    mode = root.fields.get("mode")
    if isinstance(mode, str):
        return mode.lower()
    scala_object = mode.get("object") if isinstance(mode, dict) else None
    if isinstance(scala_object, str):
        return scala_object.rsplit(".", 1)[-1].rstrip("$").lower()
    overwrite = root.fields.get("overwrite")
    if isinstance(overwrite, bool):
        return "overwrite" if overwrite else "append"
    if root.cls in APPEND_COMMANDS:
        return "append"
    if root.cls in OVERWRITE_COMMANDS:
        return "overwrite"
    return None


def _format(root: Node, catalog_table: dict[str, Any] | None) -> str | None:
    provider = (catalog_table or {}).get("provider")
    if isinstance(provider, str):
        return provider
    provider = root.fields.get("provider")
    return provider if isinstance(provider, str) else None


def _string_map(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(key): str(item) for key, item in value.items() if key not in ("product-class",)}
    return {}
