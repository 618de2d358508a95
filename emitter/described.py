"""Pure parsers of what the listeners copy out of the JVM as text: the JSON of the Java helpers
(`emitter/listener/java/`: leaves, the write, file listings, the partitions scans read), Spark's
schema JSON, streaming progress JSON and job descriptions, into the plain data of
`emitter.capture`. No py4j, no file system: the listeners call these on the strings they read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

from emitter.capture import MicroBatchTag, RelationInfo, SchemaField, TableRef, WriteInfo
from emitter.snapshots import MicroBatch, partitions_read, path_of

Partitions = tuple[Mapping[str, str | None], ...]

# Spark's micro-batch job description: "{name}\nid = {queryId}\nrunId = {runId}\nbatch = {batchId}"
_BATCH_DESCRIPTION = re.compile(r"id = (?P<query>[0-9a-f-]{36})\s+runId = (?P<run>[0-9a-f-]{36})\s+batch = (?P<batch>\d+)")


def parse_batch_description(description: str) -> MicroBatchTag | None:
    match = _BATCH_DESCRIPTION.search(description)
    if match is None:
        return None
    return MicroBatchTag(match.group("query"), match.group("run"), int(match.group("batch")))


# leaves read entirely from the helper's description; any other leaf takes the py4j path
DESCRIBED_LEAF_CLASSES = frozenset({"LogicalRelation", "LocalRelation", "OneRowRelation", "Range", "LogicalRDD"})


def described_relation(description: dict[str, Any]) -> RelationInfo | None:
    """RelationInfo from one `describe_leaves` entry; None for leaves that are no dataset."""
    if description["class"] != "LogicalRelation" or description.get("relation") != "HadoopFsRelation":
        return None
    table = description.get("table")
    return RelationInfo(
        node_class="LogicalRelation",
        paths=tuple(description.get("paths", ())),
        format=description.get("format") or description.get("provider"),
        table=TableRef(table["name"], table.get("database"), table.get("catalog")) if table else None,
        table_location=description.get("location"),
        schema=schema_fields(description["schema"]),
        partition_columns=tuple(description.get("partitionColumns", ())),
    )


def fully_described(descriptions: list[dict[str, Any]]) -> bool:
    return all(
        d["class"] in DESCRIBED_LEAF_CLASSES and (d["class"] != "LogicalRelation" or d.get("relation") == "HadoopFsRelation")
        for d in descriptions
    )


def schema_fields(struct: dict[str, Any]) -> tuple[SchemaField, ...]:
    return tuple(_schema_field(field["name"], field["type"]) for field in struct.get("fields", []))


def _schema_field(name: str, data_type: Any) -> SchemaField:
    if isinstance(data_type, str):
        return SchemaField(name=name, type=data_type)
    kind = data_type.get("type")
    if kind == "struct":
        return SchemaField(name=name, type="struct", fields=schema_fields(data_type))
    if kind == "array":
        element = _schema_field("_element", data_type["elementType"])
        return SchemaField(name=name, type=f"array<{element.type}>", fields=element.fields)
    if kind == "map":
        key = _schema_field("key", data_type["keyType"])
        value = _schema_field("value", data_type["valueType"])
        return SchemaField(name=name, type=f"map<{key.type},{value.type}>", fields=value.fields)
    return SchemaField(name=name, type=str(kind))


def described_write(description: dict[str, Any]) -> WriteInfo:
    """WriteInfo from the helper's JSON (see java/SparkLineageWrites.java)."""
    command = description["command"]
    output_columns = tuple(description.get("columns") or ())
    fields = schema_fields(description.get("schema") or {})
    if len(fields) == len(output_columns):
        fields = tuple(SchemaField(name, f.type, f.fields) for name, f in zip(output_columns, fields, strict=True))
    table_json = description.get("table")
    table = TableRef(table_json["name"], table_json.get("database"), table_json.get("catalog")) if table_json else None
    path = description.get("path")
    if path is not None:
        target = RelationInfo(
            node_class=command,
            paths=(path,),
            format=description.get("format"),
            table=table,
            table_location=path if table is not None else None,
            schema=fields,
        )
    else:
        target = RelationInfo(
            node_class=command,
            table=table,
            table_location=description.get("location"),
            format=description.get("format"),
            schema=fields,
        )
    metrics = {name: int(value) for name, value in (description.get("metrics") or {}).items()}
    return WriteInfo(command=command, target=target, mode=description.get("mode"), output_columns=output_columns, metrics=metrics)


def parse_listing(text: str) -> Iterator[tuple[str, int, int]]:
    """(path, size, mtime ms) from the helper's "path\tsize\tmtime" lines."""
    for line in text.splitlines():
        path, size, modified = line.rsplit("\t", 2)
        yield path, int(size), int(modified)


def location_of(relation: RelationInfo) -> str | None:
    """The one directory a relation's data lives under (table location, else its single path)."""
    if relation.table_location:
        return relation.table_location
    return relation.paths[0] if len(relation.paths) == 1 else None


def partitions_by_leaf(scans: Iterable[Mapping[str, Any]], leaves: Mapping[int, RelationInfo]) -> dict[int, Partitions]:
    """The helper's scans (`key`, root `paths`, partition `directories`) as partitions per leaf.
    A scan is the leaf its key names, else the one leaf over the same root paths; several scans
    of one leaf (a self-union) add up."""
    directories: dict[int, list[str]] = defaultdict(list)
    for scan in scans:
        key = scan.get("key")
        if key not in leaves:
            key = _leaf_over(scan.get("paths") or (), leaves)
        if key is not None and leaves[key].partition_columns:
            directories[key].extend(scan.get("directories") or ())
    return {
        key: partitions_read(location_of(leaves[key]), found, leaves[key].partition_columns) for key, found in directories.items()
    }


def _leaf_over(paths: Iterable[str], leaves: Mapping[int, RelationInfo]) -> int | None:
    roots = sorted(path_of(path) for path in paths)
    matching = [key for key, relation in leaves.items() if sorted(path_of(path) for path in relation.paths) == roots]
    return matching[0] if roots and len(matching) == 1 else None


def micro_batch_of_progress(progress: Mapping[str, Any], checkpoint_location: str | None) -> MicroBatch:
    """The `microBatch` facet's content from a StreamingQueryProgress JSON."""
    duration = (progress.get("durationMs") or {}).get("triggerExecution")
    return MicroBatch(
        batch_id=int(progress["batchId"]),
        query_id=str(progress["id"]),
        run_id=str(progress["runId"]),
        num_input_rows=int(progress.get("numInputRows") or 0),
        checkpoint_location=checkpoint_location,
        duration_ms=int(duration) if duration is not None else None,
    )


def parse_time(text: str | None) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(timezone.utc)
