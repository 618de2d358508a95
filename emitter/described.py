"""Pure parsers of what the listeners copy out of the JVM as text: the JSON of the Java helpers
(`emitter/listener/java/`: leaves, the write, file listings, the partitions scans read), Spark's
schema JSON, streaming progress JSON and job descriptions, into the plain data of
`emitter.capture`. No py4j, no file system: the listeners call these on the strings they read.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import orjson
from attrs import frozen

from emitter.capture import MicroBatchTag, PushedFilter, RelationInfo, SchemaField, TableRef, WriteInfo
from emitter.naming import jdbc_location, kafka_uris
from emitter.snapshots import (
    ICEBERG_PROVIDER,
    MicroBatch,
    Snapshot,
    delta_table_version,
    distinct_partitions,
    partitions_read,
    path_of,
    stream_offsets_snapshot,
    v2_table_version,
)
from emitter.table_events import TableEvent, iceberg_table_identifier, table_event

Partitions = tuple[Mapping[str, str | None], ...]

# Spark's micro-batch job description: "{name}\nid = {queryId}\nrunId = {runId}\nbatch = {batchId}"
_BATCH_DESCRIPTION = re.compile(r"id = (?P<query>[0-9a-f-]{36})\s+runId = (?P<run>[0-9a-f-]{36})\s+batch = (?P<batch>\d+)")


def parse_batch_description(description: str) -> MicroBatchTag | None:
    match = _BATCH_DESCRIPTION.search(description)
    if match is None:
        return None
    return MicroBatchTag(match.group("query"), match.group("run"), int(match.group("batch")))


@frozen
class DescribedPlan:
    """`java/SparkLineagePlanDumper.java`'s description of a plan: its leaves (and those of the
    plans cached DataFrames in it hold), its JSON, and the JSON of each of those cached plans."""

    leaves: tuple[Mapping[str, Any], ...]
    plan_json: str
    cached_plan_jsons: tuple[str, ...] = ()

    @property
    def errors(self) -> tuple[str, ...]:
        """Leaves the helper failed on, as "class: error"."""
        return tuple(f"{leaf['class']}: {leaf['error']}" for leaf in self.leaves if "error" in leaf)


def parse_described_plan(text: str) -> DescribedPlan:
    """The helper's lines: the leaves' JSON, the plan's JSON, then one line per cached plan."""
    leaves_json, _, rest = text.partition("\n")
    plan_json, *cached = rest.split("\n")
    return DescribedPlan(tuple(_loads(leaves_json)), plan_json, tuple(cached))


def _loads(text: str) -> Any:
    """orjson, json only for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


LISTENER_CALL_SEPARATOR = "\0"


@frozen
class ListenerCall:
    """A query callback as the listener's JVM registration hands it over
    (`java/SparkLineageListenerRegistration.java`): the action's name and, when the JVM described
    the action before calling (one crossing instead of two), that description (a helper result:
    inline, or a temp file's reference) and the milliseconds it took there."""

    func_name: str
    description: str | None = None
    describe_ms: float = 0.0


def parse_listener_call(func_name: str) -> ListenerCall:
    """funcName, or funcName NUL nanoseconds NUL description."""
    name, separator, rest = func_name.partition(LISTENER_CALL_SEPARATOR)
    if not separator:
        return ListenerCall(name)
    nanoseconds, _, description = rest.partition(LISTENER_CALL_SEPARATOR)
    return ListenerCall(name, description, int(nanoseconds) / 1_000_000)


@frozen
class DescribedAction:
    """`java/SparkLineageActions.java`'s description of one action: the optimized plan's class,
    the QueryExecution's id, the JVM tagger's tags (None without a tagger), the helper's
    description of the write (None when the action writes nothing), the plan's description
    when the helper was asked for it (None otherwise), and Iceberg's scans and commits of it."""

    root_class: str
    query_execution_id: int
    tags: str | None
    write: Mapping[str, Any] | None
    plan: DescribedPlan | None
    table_events: tuple[TableEvent, ...] = ()


def parse_described_action(text: str) -> DescribedAction:
    """The helper's header line (JSON), then `parse_described_plan`'s lines when it described the plan."""
    header_json, newline, rest = text.partition("\n")
    header = _loads(header_json)
    return DescribedAction(
        root_class=str(header["root"]),
        query_execution_id=int(header["id"]),
        tags=header.get("tags"),
        write=header.get("write"),
        plan=parse_described_plan(rest) if newline else None,
        table_events=tuple(table_event(event) for event in header.get("tableEvents") or ()),
    )


def described_leaves(
    described: DescribedPlan, skip_classes: Iterable[str] = ()
) -> tuple[dict[int, RelationInfo], dict[int, str]]:
    """Every leaf that names a dataset (by `plan.leaf_key`; the first description of a key wins),
    and the JSON of the plan each cached DataFrame's `InMemoryRelation` holds (a key space of its
    own: it shares expr ids with the plan it caches). Leaves of `skip_classes` are left out."""
    skipped = frozenset(skip_classes)
    leaves: dict[int, RelationInfo] = {}
    cached_plans: dict[int, str] = {}
    for description in described.leaves:
        key = description.get("key")
        if key is None or description["class"] in skipped:
            continue
        if description["class"] == "InMemoryRelation":
            index = description.get("cached")
            if index is not None:
                cached_plans.setdefault(key, described.cached_plan_jsons[index])
            continue
        info = described_relation(description)
        if info is not None and key not in leaves:
            leaves[key] = info
    return leaves, cached_plans


def described_relation(description: Mapping[str, Any]) -> RelationInfo | None:
    """RelationInfo from one leaf of `DescribedPlan.leaves`; None for leaves that name no dataset
    (local data, ranges, a relation without path or table)."""
    node_class = description["class"]
    schema = schema_fields(description.get("schema") or {})
    if "v2" in description:
        info = _v2_relation(node_class, description["v2"], schema)
    elif node_class == "LogicalRelation":
        info = _logical_relation(description, schema)
    elif node_class == "HiveTableRelation":
        info = RelationInfo(
            node_class=node_class,
            table=_table_ref(description.get("table")),
            table_location=description.get("location"),
            format=description.get("provider"),
            schema=schema,
        )
    else:
        return None
    return info if info.paths or info.table is not None else None


def _logical_relation(description: Mapping[str, Any], schema: tuple[SchemaField, ...]) -> RelationInfo:
    relation = description.get("relation")
    if relation == "HadoopFsRelation":
        return RelationInfo(
            node_class="LogicalRelation",
            paths=tuple(description.get("paths", ())),
            format=description.get("format") or description.get("provider"),
            table=_table_ref(description.get("table")),
            table_location=description.get("location"),
            schema=schema,
            partition_columns=tuple(description.get("partitionColumns", ())),
            table_version=delta_table_version(description.get("deltaVersion")),
        )
    if relation == "JDBCRelation":
        options = description.get("options") or {}
        url = options.get("url", "")
        location = jdbc_location(url, options.get("dbtable") or options.get("query", "")) if url else None
        return RelationInfo(node_class="LogicalRelation", paths=(location,) if location else (), format="jdbc", schema=schema)
    if relation == "KafkaRelation":  # a batch read of Kafka: a dataset per topic
        return RelationInfo(
            node_class="LogicalRelation", paths=kafka_uris(description.get("options") or {}), format="kafka", schema=schema
        )
    return RelationInfo(
        node_class="LogicalRelation",
        table=_table_ref(description.get("table")),
        table_location=description.get("location"),
        format=relation,
        schema=schema,
    )


def _v2_relation(node_class: str, v2: Mapping[str, Any], schema: tuple[SchemaField, ...]) -> RelationInfo:
    """A DataSourceV2 table: named by its catalog identifier (else the table's own name); an
    Iceberg table versioned by its snapshot as its properties tell (the pinned one of a
    time-travel read, else the current one), which the snapshots Iceberg reported of the action
    replace (`with_scanned_versions`, `committed_snapshot`), with its partition fields and the
    filters its scan evaluates itself."""
    properties = v2.get("properties") or {}
    identifier = v2.get("identifier")
    if identifier is not None:
        name, namespace = identifier["name"], tuple(identifier.get("namespace") or ())
        if (properties.get("provider") or "").lower() == ICEBERG_PROVIDER:
            name, namespace = iceberg_table_identifier(name, namespace)
        table = TableRef(name, ".".join(namespace) or None, v2.get("catalog"))
    else:
        table = TableRef(v2["name"])
    return RelationInfo(
        node_class=node_class,
        table=table,
        table_location=properties.get("location"),
        format=properties.get("provider"),
        schema=schema,
        table_version=v2_table_version(properties, v2.get("pinnedSnapshot")),
        partition_columns=tuple(v2.get("partitionColumns") or ()),
        v2_name=v2.get("name"),
        pushed_filters=tuple(
            PushedFilter(str(pushed["description"]), tuple(pushed.get("columns") or ()))
            for pushed in v2.get("pushedFilters") or ()
        ),
    )


def _table_ref(table: Mapping[str, Any] | None) -> TableRef | None:
    return TableRef(table["name"], table.get("database"), table.get("catalog")) if table else None


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


def described_write(description: Mapping[str, Any]) -> WriteInfo:
    """WriteInfo from the helper's JSON (see java/SparkLineageWrites.java)."""
    command = description["command"]
    output_columns = tuple(description.get("columns") or ())
    fields = schema_fields(description.get("schema") or {})
    if len(fields) == len(output_columns):
        fields = tuple(SchemaField(name, f.type, f.fields) for name, f in zip(output_columns, fields, strict=True))
    table = _table_ref(description.get("table"))
    path = description.get("path")
    if "v2" in description:
        target = _v2_relation(command, description["v2"], fields)
    elif "source" in description:
        location = _data_source_location(description.get("options") or {})
        target = RelationInfo(
            node_class=command, paths=(location,) if location else (), format=description["source"], schema=fields
        )
    elif path is not None:
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
            format=description.get("provider"),
            schema=fields,
        )
    metrics = {name: int(value) for name, value in (description.get("metrics") or {}).items()}
    return WriteInfo(
        command=command,
        target=target,
        mode=description.get("mode"),
        output_columns=output_columns,
        metrics=metrics,
        into_staged_table=bool(description.get("staged")),
    )


def _data_source_location(options: Mapping[str, str]) -> str:
    """Where a V1 data source write (`SaveIntoDataSourceCommand`) goes: its path, a JDBC table, a
    Kafka topic; "" when its options do not say."""
    location = options.get("path") or options.get("url", "")
    if location.startswith("jdbc:"):
        return jdbc_location(location, options.get("dbtable") or options.get("query", ""))
    if "kafka.bootstrap.servers" in options:
        return next(iter(kafka_uris(options)), "")
    return location


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
    """The helper's scans as partitions per leaf: a file scan's (`key`, root `paths`, partition
    `directories`), an Iceberg scan's (`key`, `partitions`: the partitions of the tasks it
    planned). A scan is the leaf its key names, else the one leaf over the same root paths;
    several scans of one leaf (a self-union) add up."""
    directories: dict[int, list[str]] = defaultdict(list)
    planned: dict[int, list[Mapping[str, str | None]]] = defaultdict(list)
    for scan in scans:
        key = scan.get("key")
        if key not in leaves:
            key = _leaf_over(scan.get("paths") or (), leaves)
        if key is None or not leaves[key].partition_columns:
            continue
        if "partitions" in scan:
            planned[key].extend(scan["partitions"])
        else:
            directories[key].extend(scan.get("directories") or ())
    found: dict[int, Partitions] = {
        key: partitions_read(location_of(leaves[key]), listed, leaves[key].partition_columns)
        for key, listed in directories.items()
    }
    found.update({key: distinct_partitions(partitions) for key, partitions in planned.items()})
    return found


def kafka_reads_by_leaf(scans: Iterable[Mapping[str, Any]], leaves: Mapping[int, RelationInfo]) -> dict[int, Snapshot]:
    """The helper's Kafka scans (`key`, `ranges` of `topic`, `partition`, `from`, `until`) as a
    `stream-offsets` snapshot per leaf: the offsets `{topic: {partition: offset}}` the batch read
    started at and ended before (the pipeline gives each topic's dataset its own part). A read from
    `earliest` or to `latest` gets none: Spark's driver leaves those ranges open (-2, -1) and each
    task resolves its own when it runs; so a leaf with any open range has no snapshot."""
    start: dict[int, dict[str, dict[str, int]]] = defaultdict(dict)
    end: dict[int, dict[str, dict[str, int]]] = defaultdict(dict)
    open_ranges: set[int] = set()
    for scan in scans:
        key = scan.get("key")
        if not isinstance(key, int) or key not in leaves or not leaves[key].paths:
            continue
        for read in scan.get("ranges") or ():
            topic, partition, first, until = read["topic"], str(read["partition"]), int(read["from"]), int(read["until"])
            if first < 0 or until < 0:
                open_ranges.add(key)
            start[key].setdefault(topic, {})[partition] = first
            end[key].setdefault(topic, {})[partition] = until
    return {
        key: stream_offsets_snapshot(leaves[key].paths[0], start[key], end[key], None) for key in end if key not in open_ranges
    }


def _leaf_over(paths: Iterable[str], leaves: Mapping[int, RelationInfo]) -> int | None:
    roots = sorted(path_of(path) for path in paths)
    matching = [key for key, relation in leaves.items() if sorted(path_of(path) for path in relation.paths) == roots]
    return matching[0] if roots and len(matching) == 1 else None


def parse_initial_offsets(text: str) -> Any | None:
    """A streaming source's start as its checkpoint's `sources/<index>/0` keeps it: Kafka's is a NUL
    (kept for Spark 2.1), `v1`, a newline and the offsets' JSON; None for anything else."""
    version, _, offsets = text.lstrip("\0").partition("\n")
    if version != "v1" or not offsets.strip():
        return None
    try:
        return json.loads(offsets)
    except ValueError:
        return None


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
