"""py4j helpers: copy what the pipeline needs out of the JVM with as few round trips as possible.

The plan and its leaves travel in one call of a Java helper (`PlanDumper.describe`, see
`emitter.listener.janino` for how helpers are compiled and how their large results come back).
The plan's JSON is written by `java/SparkLineageCompactPlan.java`: `toJSON()`'s shape without
what the lineage engine never reads (about half the text, a third of the time).
When Janino is unavailable we fall back to `toJSON()` and py4j calls per leaf.

Everything else (the write target, mode, metrics) comes from a few targeted calls on the live
plan objects, each guarded: a missing detail never fails a capture. Nothing is copied that the
pipeline does not use: of data source options only the keys that name a dataset.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from emitter.capture import RelationInfo, SchemaField, TableRef, WriteInfo
from emitter.described import described_write, schema_fields
from emitter.listener import janino
from emitter.naming import NAMING_OPTIONS, kafka_uris
from emitter.snapshots import is_iceberg, v2_table_version

log = logging.getLogger(__name__)

DUMPER_CLASS = "SparkLineagePlanDumper"
WRITE_METRICS = ("numOutputRows", "numOutputBytes", "numFiles")


class PlanDumper:
    """Plans out of the JVM through the helper `java/SparkLineagePlanDumper.java`."""

    def __init__(self, gateway: Any, compact: bool = True) -> None:
        """`compact=False`: plans as Spark's own `toJSON()` (the TPC-DS benchmark compares both)."""
        self.gateway = gateway
        self.helper: Any = janino.optional_instance(gateway, DUMPER_CLASS, "plans go through toJSON()")
        if self.helper is not None and not compact:
            self.helper.setCompact(False)

    def to_json(self, tree: Any) -> str:
        if self.helper is not None:
            try:
                return str(janino.read_result(self.helper.dump(tree)))
            except Exception as error:  # noqa: BLE001
                log.debug("plan dump through the helper failed, using toJSON(): %s", error)
        return str(tree.toJSON())

    def describe(self, plan: Any) -> tuple[list[dict[str, Any]], str] | None:
        """Every leaf of `plan` (and its subqueries) in `leaves_with_subqueries` order, and the
        plan's JSON, in one round trip; None when the helper is unavailable or fails."""
        if self.helper is None:
            return None
        try:
            text = str(janino.read_result(self.helper.describe(plan)))
        except Exception as error:  # noqa: BLE001
            log.debug("leaf description through the helper failed: %s", error)
            return None
        leaves, _, plan_json = text.partition("\n")
        return json.loads(leaves), plan_json


# scala collection helpers ----------------------------------------------------------------
def iterate(seq: Any) -> Iterator[Any]:
    iterator = seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


def option(value: Any) -> Any | None:
    return value.get() if value is not None and value.isDefined() else None


def naming_options(options: Any) -> dict[str, str]:
    """The dataset-naming keys (`naming.NAMING_OPTIONS`) of a Scala options map, nothing else."""
    found = {}
    for key in sorted(NAMING_OPTIONS):
        value = option(options.get(key))
        if value is not None:
            found[key] = str(value)
    return found


def guarded(default: Any, call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - the JVM object lacks what we look for
        return default


def cached_logical_plan(in_memory_relation: Any) -> Any | None:
    """The optimized plan a cached DataFrame (`InMemoryRelation`) holds. Spark 4 keeps it on the
    cache builder; Spark 3.5 only as the logical link of the cached physical plan: the topmost
    physical node that has one, if it has the relation's output. None when neither is found."""
    builder = in_memory_relation.cacheBuilder()
    try:
        return builder.logicalPlan()
    except Exception:  # noqa: BLE001, S110 - Spark 3.5 has no logicalPlan(): follow the cached physical plan
        pass
    node = builder.cachedPlan()
    while node is not None:
        link = node.logicalLink()
        if link.isDefined():
            plan = link.get()
            same_output = str(plan.output().toString()) == str(in_memory_relation.output().toString())
            return plan if same_output else None
        children = node.children()
        node = children.head() if children.size() == 1 else None
    return None


def simple_class(obj: Any) -> str:
    return str(obj.getClass().getSimpleName())


# leaves ----------------------------------------------------------------------------------
def leaf_key(node: Any) -> int | None:
    output = node.output()
    if output.isEmpty():
        return None
    return int(output.head().exprId().id())


def leaves_with_subqueries(plan: Any) -> list[Any]:
    found = list(iterate(plan.collectLeaves()))
    for subquery in iterate(plan.subqueriesAll()):
        found += iterate(subquery.collectLeaves())
    return found


def relation_info(leaf: Any, node_class: str) -> RelationInfo:
    if node_class == "LogicalRelation":
        return _logical_relation(leaf)
    if node_class == "HiveTableRelation":
        return _catalog_relation(node_class, leaf.tableMeta(), schema_of(leaf))
    if node_class in {"DataSourceV2Relation", "DataSourceV2ScanRelation", "StreamingDataSourceV2Relation"}:
        return _v2_relation(leaf, node_class)
    return RelationInfo(node_class=node_class, schema=guarded((), schema_of, leaf))


def _logical_relation(leaf: Any) -> RelationInfo:
    relation = leaf.relation()
    relation_class = simple_class(relation)
    schema = schema_of(leaf)
    catalog_table = option(leaf.catalogTable())
    if catalog_table is not None:
        info = _catalog_relation("LogicalRelation", catalog_table, schema)
    else:
        info = RelationInfo(node_class="LogicalRelation", schema=schema)
    if relation_class == "HadoopFsRelation":
        paths = tuple(str(path) for path in iterate(relation.location().rootPaths()))
        return RelationInfo(
            node_class=info.node_class,
            paths=info.paths or paths,
            format=file_format(relation.fileFormat()),
            table=info.table,
            table_location=info.table_location,
            schema=schema,
            partition_columns=tuple(f.name for f in schema_fields(json.loads(str(relation.partitionSchema().json())))),
        )
    if relation_class == "JDBCRelation":
        options = guarded({}, lambda: naming_options(relation.jdbcOptions().parameters()))
        url = options.get("url", "")
        table_name = options.get("dbtable") or options.get("query", "")
        return RelationInfo(
            node_class="LogicalRelation", paths=(f"{url}/{table_name}",) if url else (), format="jdbc", schema=schema
        )
    return RelationInfo(
        node_class=info.node_class, table=info.table, table_location=info.table_location, schema=schema, format=relation_class
    )


def file_format(fmt: Any) -> str:
    short_name = guarded(None, lambda: str(fmt.shortName()))
    return short_name or str(fmt.toString()).lower()


def table_ref(identifier: Any) -> TableRef:
    return TableRef(
        name=str(identifier.table()),
        database=guarded(None, lambda: option(identifier.database())),
        catalog=guarded(None, lambda: option(identifier.catalog())),
    )


def _catalog_relation(node_class: str, catalog_table: Any, schema: tuple[SchemaField, ...]) -> RelationInfo:
    location = guarded(None, lambda: option(catalog_table.storage().locationUri()))
    return RelationInfo(
        node_class=node_class,
        table=table_ref(catalog_table.identifier()),
        table_location=str(location) if location is not None else None,
        format=guarded(None, lambda: option(catalog_table.provider())),
        schema=schema,
    )


def _v2_relation(leaf: Any, node_class: str) -> RelationInfo:
    relation = leaf.relation() if node_class == "DataSourceV2ScanRelation" else leaf
    identifier = guarded(None, lambda: option(relation.identifier()))
    table = relation.table()
    properties = guarded({}, lambda: dict(table.properties()))
    location = properties.get("location")
    if identifier is not None:
        namespace = list(identifier.namespace())
        ref = TableRef(
            name=str(identifier.name()),
            database=".".join(namespace) or None,
            catalog=guarded(None, lambda: str(relation.catalog().get().name())),
        )
    else:
        ref = TableRef(name=str(table.name()))
    return RelationInfo(
        node_class=node_class,
        table=ref,
        table_location=location,
        format=properties.get("provider"),
        schema=schema_of(leaf),
        table_version=_iceberg_version(table, properties),
    )


def _iceberg_version(table: Any, properties: dict[str, str]) -> tuple[str, str] | None:
    """Iceberg's snapshot id: its SparkTable lists the current one among its properties, which it
    computes live (so a write target read after the commit gives the snapshot just produced), and
    `snapshotId()` holds the one a time-travel read is pinned to."""
    if not is_iceberg(properties):  # spares other V2 tables the py4j call below
        return None
    pinned = guarded(None, lambda: table.snapshotId())
    return v2_table_version(properties, None if pinned is None else str(pinned))


# schemas ---------------------------------------------------------------------------------
def schema_of(node: Any) -> tuple[SchemaField, ...]:
    return schema_fields(json.loads(str(node.schema().json())))


# writes ----------------------------------------------------------------------------------
WRITES_CLASS = "SparkLineageWrites"


class WriteDescriber:
    """The write an action ran, with its executed metrics, in one call of the helper
    `java/SparkLineageWrites.java`; through py4j call by call where the helper does not know
    the command (or is unavailable)."""

    def __init__(self, gateway: Any) -> None:
        self.helper: Any = janino.optional_instance(gateway, WRITES_CLASS, "writes are read through py4j")

    def describe(self, query_execution: Any, root: Any, command: str) -> tuple[WriteInfo | None, bool]:
        """(the write, whether its metrics are in it); (None, True) when the action writes nothing."""
        if command not in _WRITE_EXTRACTORS:
            return None, True
        if self.helper is not None:
            text = guarded(None, lambda: janino.read_result(self.helper.describe(query_execution)))
            if text:
                return described_write(json.loads(text)), True
        return write_info(root, command, query_execution, with_metrics=False), False


def write_info(root: Any, command: str, query_execution: Any, with_metrics: bool = True) -> WriteInfo | None:
    """What the write command targets, or None when the root writes nothing we recognise."""
    extractor = _WRITE_EXTRACTORS.get(command)
    if extractor is None:
        return None
    info = extractor(root, command)
    metrics = executed_write_metrics(query_execution) if with_metrics else {}
    return WriteInfo(
        command=info.command, target=info.target, mode=info.mode, output_columns=info.output_columns, metrics=metrics
    )


def executed_write_metrics(query_execution: Any) -> dict[str, int]:
    """Rows, bytes and files written: the optimized plan's command holds fresh metrics, the
    executed one the real counts."""
    return guarded({}, write_metrics, _physical_root(query_execution.executedPlan()))


def _physical_root(plan: Any) -> Any:
    """The write node under adaptive execution (AQE wraps whole planned writes when they shuffle)."""
    for _ in range(5):
        node_class = simple_class(plan)
        if node_class == "AdaptiveSparkPlanExec":
            plan = plan.executedPlan()
        elif node_class.endswith("QueryStageExec"):
            plan = plan.plan()
        elif node_class == "CommandResultExec":
            plan = plan.commandPhysicalPlan()
        else:
            break
    return plan


def write_metrics(node: Any) -> dict[str, int]:
    metrics = node.metrics()
    found = {}
    for name in WRITE_METRICS:
        metric = option(metrics.get(name))
        if metric is not None:
            found[name] = int(metric.value())
    return found


def _output_schema(query: Any, output_columns: tuple[str, ...]) -> tuple[SchemaField, ...]:
    fields = schema_of(query)
    if len(fields) != len(output_columns):
        return fields
    return tuple(SchemaField(name, f.type, f.fields) for name, f in zip(output_columns, fields, strict=True))


def _insert_into_hadoop_fs(root: Any, command: str) -> WriteInfo:
    output_columns = tuple(str(name) for name in iterate(root.outputColumnNames()))
    catalog_table = option(root.catalogTable())
    output_path = str(root.outputPath())
    target = RelationInfo(
        node_class=command,
        paths=(output_path,),
        format=file_format(root.fileFormat()),
        table=table_ref(catalog_table.identifier()) if catalog_table is not None else None,
        table_location=output_path if catalog_table is not None else None,
        schema=_output_schema(root.query(), output_columns),
    )
    return WriteInfo(command=command, target=target, mode=str(root.mode()), output_columns=output_columns)


def _catalog_table_write(table_getter: str) -> Any:
    def extract(root: Any, command: str) -> WriteInfo:
        catalog_table = getattr(root, table_getter)()
        output_columns = tuple(guarded([], lambda: [str(n) for n in iterate(root.outputColumnNames())]))
        target = _catalog_relation(command, catalog_table, _output_schema(root.query(), output_columns))
        return WriteInfo(
            command=command, target=target, mode=guarded(None, lambda: str(root.mode())), output_columns=output_columns
        )

    return extract


def _v2_write(root: Any, command: str) -> WriteInfo:
    target = relation_info(root.table(), simple_class(root.table()))
    output_columns = tuple(f.name for f in target.schema)
    return WriteInfo(
        command=command, target=target, mode="Overwrite" if command != "AppendData" else "Append", output_columns=output_columns
    )


def _save_into_data_source(root: Any, command: str) -> WriteInfo:
    options = naming_options(root.options())
    source = simple_class(root.dataSource())
    location = options.get("path") or options.get("url", "")
    if "dbtable" in options:
        location = f"{location}/{options['dbtable']}"
    elif "kafka.bootstrap.servers" in options:
        location = next(iter(kafka_uris(options)), "")
    target = RelationInfo(
        node_class=command, paths=(location,) if location else (), format=source, schema=schema_of(root.query())
    )
    return WriteInfo(command=command, target=target, mode=str(root.mode()), output_columns=tuple(f.name for f in target.schema))


_WRITE_EXTRACTORS = {
    "InsertIntoHadoopFsRelationCommand": _insert_into_hadoop_fs,
    "CreateDataSourceTableAsSelectCommand": _catalog_table_write("table"),
    "SaveAsV1TableCommand": _catalog_table_write("tableDesc"),
    "InsertIntoHiveTable": _catalog_table_write("table"),
    "CreateHiveTableAsSelectCommand": _catalog_table_write("tableDesc"),
    "OptimizedCreateHiveTableAsSelectCommand": _catalog_table_write("tableDesc"),
    "AppendData": _v2_write,
    "OverwriteByExpression": _v2_write,
    "OverwritePartitionsDynamic": _v2_write,
    "ReplaceData": _v2_write,
    "SaveIntoDataSourceCommand": _save_into_data_source,
}
