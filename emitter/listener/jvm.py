"""py4j helpers: copy what the pipeline needs out of the JVM with as few round trips as possible.

The plan itself travels as one JSON text. py4j stalls ~44 ms on any string of 8 KB or more, so
a tiny Java class (compiled once per JVM with Janino, which Spark ships for codegen) writes
`plan.toJSON()` to a temp file that Python reads back: 14 ms instead of 52 ms for a 130 KB plan.
When Janino is unavailable we fall back to a plain `toJSON()` call.

Everything else (paths, formats, table identifiers, write mode, metrics) comes from a few
targeted calls on the live plan objects, each guarded: a missing detail never fails a capture.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from emitter.capture import RelationInfo, SchemaField, TableRef, WriteInfo
from emitter.snapshots import is_iceberg, v2_table_version

log = logging.getLogger(__name__)

_DUMPER_CLASS = "SparkLineagePlanDumper"
_DUMPER_SOURCE = r"""
public class SparkLineagePlanDumper {
  public static long dump(org.apache.spark.sql.catalyst.trees.TreeNode plan, String path) throws Exception {
    byte[] bytes = plan.toJSON().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    java.nio.file.Files.write(java.nio.file.Paths.get(path), bytes);
    return bytes.length;
  }

  // every leaf of the plan and its subqueries, as a JSON list: class, key, schema, paths, format, table

  static void str(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') { b.append('\\').append(c); }
      else if (c < 0x20) { b.append(String.format("\\u%04x", new Object[] { Integer.valueOf((int) c) })); }
      else { b.append(c); }
    }
    b.append('"');
  }
  static void opt(StringBuilder b, String key, scala.Option value) {
    if (value.isDefined()) { b.append(",\"").append(key).append("\":"); str(b, String.valueOf(value.get())); }
  }
  // the files Spark's index already listed for the read (for the input snapshot id):
  // [[path, size, mtime ms], ...]; null for an index kind we do not know; absent on failure
  static void files(StringBuilder b, Object index) {
    int mark = b.length();
    try {
      b.append(",\"files\":");
      Object listable = index;
      if (index instanceof org.apache.spark.sql.execution.datasources.CatalogFileIndex) {
        listable = ((org.apache.spark.sql.execution.datasources.CatalogFileIndex) index)
            .filterPartitions(scala.collection.immutable.Nil$.MODULE$);
      }
      if (!(listable instanceof org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex)) { b.append("null"); return; }
      scala.collection.Iterator statuses =
          ((org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex) listable).allFiles().iterator();
      b.append('[');
      boolean firstFile = true;
      while (statuses.hasNext()) {
        org.apache.hadoop.fs.FileStatus status = (org.apache.hadoop.fs.FileStatus) statuses.next();
        if (!firstFile) b.append(',');
        firstFile = false;
        b.append('[');
        str(b, status.getPath().toString());
        b.append(',').append(status.getLen()).append(',').append(status.getModificationTime()).append(']');
      }
      b.append(']');
    } catch (Throwable error) {
      b.setLength(mark);
    }
  }
  static void leaf(StringBuilder b, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan leaf) {
    b.append("{\"class\":");
    str(b, leaf.getClass().getSimpleName());
    if (!leaf.output().isEmpty()) {
      org.apache.spark.sql.catalyst.expressions.Attribute first = (org.apache.spark.sql.catalyst.expressions.Attribute) leaf.output().head();
      b.append(",\"key\":").append(first.exprId().id());
    }
    b.append(",\"schema\":").append(leaf.schema().json());
    if (leaf instanceof org.apache.spark.sql.execution.datasources.LogicalRelation) {
      org.apache.spark.sql.execution.datasources.LogicalRelation logical = (org.apache.spark.sql.execution.datasources.LogicalRelation) leaf;
      Object relation = logical.relation();
      b.append(",\"relation\":");
      str(b, relation.getClass().getSimpleName());
      if (relation instanceof org.apache.spark.sql.execution.datasources.HadoopFsRelation) {
        org.apache.spark.sql.execution.datasources.HadoopFsRelation fs = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) relation;
        b.append(",\"paths\":[");
        scala.collection.Iterator paths = fs.location().rootPaths().iterator();
        boolean firstPath = true;
        while (paths.hasNext()) { if (!firstPath) b.append(','); firstPath = false; str(b, String.valueOf(paths.next())); }
        b.append(']');
        Object format = fs.fileFormat();
        b.append(",\"format\":");
        if (format instanceof org.apache.spark.sql.sources.DataSourceRegister) {
          str(b, ((org.apache.spark.sql.sources.DataSourceRegister) format).shortName());
        } else { str(b, String.valueOf(format).toLowerCase()); }
        files(b, fs.location());
      }
      scala.Option catalogTable = logical.catalogTable();
      if (catalogTable.isDefined()) {
        org.apache.spark.sql.catalyst.catalog.CatalogTable table = (org.apache.spark.sql.catalyst.catalog.CatalogTable) catalogTable.get();
        b.append(",\"table\":{\"name\":");
        str(b, table.identifier().table());
        opt(b, "database", table.identifier().database());
        opt(b, "catalog", table.identifier().catalog());
        b.append('}');
        opt(b, "location", table.storage().locationUri());
        opt(b, "provider", table.provider());
      }
    }
    b.append('}');
  }
  public static long describe(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, String path) throws Exception {
    StringBuilder b = new StringBuilder("[");
    java.util.List plans = new java.util.ArrayList();
    plans.add(plan);
    scala.collection.Iterator subqueries = plan.subqueriesAll().iterator();
    while (subqueries.hasNext()) { plans.add(subqueries.next()); }
    boolean first = true;
    for (int p = 0; p < plans.size(); p++) {
      scala.collection.Iterator leaves = ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plans.get(p)).collectLeaves().iterator();
      while (leaves.hasNext()) {
        if (!first) b.append(',');
        first = false;
        leaf(b, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) leaves.next());
      }
    }
    byte[] bytes = b.append(']').toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    java.nio.file.Files.write(java.nio.file.Paths.get(path), bytes);
    return bytes.length;
  }
}
"""
_TEMP_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
WRITE_METRICS = ("numOutputRows", "numOutputBytes", "numFiles")


class PlanDumper:
    """Serializes Catalyst trees to JSON text; one compiled helper per gateway."""

    _lock = threading.Lock()
    _methods: dict[int, tuple[Any, Any] | None] = {}

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        compiled = self._compiled(gateway)
        self.method, self.describe_method = compiled if compiled is not None else (None, None)

    @classmethod
    def _compiled(cls, gateway: Any) -> tuple[Any, Any] | None:
        with cls._lock:
            if id(gateway) not in cls._methods:
                cls._methods[id(gateway)] = _compile_dumper(gateway)
            return cls._methods[id(gateway)]

    def to_json(self, tree: Any) -> str:
        if self.method is not None:
            try:
                return self._call_via_file(self.method, tree)
            except Exception as error:  # noqa: BLE001
                log.debug("plan dump through the helper failed, using toJSON(): %s", error)
        return str(tree.toJSON())

    def describe_leaves(self, plan: Any) -> list[dict[str, Any]] | None:
        """Every leaf of `plan` (and its subqueries) in one round trip, in `leaves_with_subqueries`
        order; None when the helper is unavailable or fails."""
        if self.describe_method is None:
            return None
        try:
            return json.loads(self._call_via_file(self.describe_method, plan))
        except Exception as error:  # noqa: BLE001
            log.debug("leaf description through the helper failed: %s", error)
            return None

    def _call_via_file(self, method: Any, tree: Any) -> str:
        path = os.path.join(_TEMP_DIR, f"spark-lineage-{uuid.uuid4().hex}.json")
        jvm = self.gateway.jvm
        arguments = self.gateway.new_array(jvm.java.lang.Object, 2)
        arguments[0] = tree
        arguments[1] = path
        try:
            method.invoke(None, arguments)
            with open(path, encoding="utf-8") as dumped:
                return dumped.read()
        finally:
            if os.path.exists(path):
                os.unlink(path)


def _compile_dumper(gateway: Any) -> tuple[Any, Any] | None:
    jvm = gateway.jvm
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(loader)
        compiler.cook(_DUMPER_SOURCE)
        helper = compiler.getClassLoader().loadClass(_DUMPER_CLASS)
        return (
            helper.getMethod("dump", _parameter_types(gateway, loader, "org.apache.spark.sql.catalyst.trees.TreeNode")),
            helper.getMethod(
                "describe", _parameter_types(gateway, loader, "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan")
            ),
        )
    except Exception as error:  # noqa: BLE001
        log.info("Janino plan helper unavailable (%s); plans go through toJSON()", error)
        return None


def _parameter_types(gateway: Any, loader: Any, first_class: str) -> Any:
    jvm = gateway.jvm
    parameter_types = gateway.new_array(jvm.java.lang.Class, 2)
    parameter_types[0] = jvm.java.lang.Class.forName(first_class, True, loader)
    parameter_types[1] = jvm.java.lang.Class.forName("java.lang.String")
    return parameter_types


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
    )


def fully_described(descriptions: list[dict[str, Any]]) -> bool:
    return all(
        d["class"] in DESCRIBED_LEAF_CLASSES
        and (d["class"] != "LogicalRelation" or d.get("relation") == "HadoopFsRelation")
        for d in descriptions
    )


# scala collection helpers ----------------------------------------------------------------
def iterate(seq: Any) -> Iterator[Any]:
    iterator = seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


def option(value: Any) -> Any | None:
    return value.get() if value is not None and value.isDefined() else None


def scala_map(value: Any) -> dict[str, str]:
    return {str(pair._1()): str(pair._2()) for pair in iterate(value)}


def guarded(default: Any, call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - the JVM object lacks what we look for
        return default


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
        )
    if relation_class == "JDBCRelation":
        options = guarded({}, lambda: scala_map(relation.jdbcOptions().parameters()))
        url = options.get("url", "")
        table_name = options.get("dbtable") or options.get("query", "")
        return RelationInfo(
            node_class="LogicalRelation", paths=(f"{url}/{table_name}",) if url else (), format="jdbc",
            schema=schema, options=options,
        )
    return RelationInfo(node_class=info.node_class, table=info.table, table_location=info.table_location,
                        schema=schema, format=relation_class)


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
        ref = TableRef(name=str(identifier.name()), database=".".join(namespace) or None,
                       catalog=guarded(None, lambda: str(option(relation.catalog()).name())))
    else:
        ref = TableRef(name=str(table.name()))
    return RelationInfo(node_class=node_class, table=ref, table_location=location,
                        format=properties.get("provider"), schema=schema_of(leaf),
                        table_version=_iceberg_version(table, properties))


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


# writes ----------------------------------------------------------------------------------
def write_info(root: Any, command: str, query_execution: Any, with_metrics: bool = True) -> WriteInfo | None:
    """What the write command targets, or None when the root writes nothing we recognise."""
    extractor = _WRITE_EXTRACTORS.get(command)
    if extractor is None:
        return None
    info = extractor(root, command)
    metrics = executed_write_metrics(query_execution) if with_metrics else {}
    return WriteInfo(
        command=info.command, target=info.target, mode=info.mode, partition_columns=info.partition_columns,
        static_partitions=info.static_partitions, output_columns=info.output_columns, metrics=metrics,
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
    return tuple(SchemaField(name, f.type, f.fields) for name, f in zip(output_columns, fields))


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
        options=guarded({}, lambda: scala_map(root.options())),
    )
    return WriteInfo(
        command=command,
        target=target,
        mode=str(root.mode()),
        partition_columns=tuple(str(a.name()) for a in iterate(root.partitionColumns())),
        static_partitions=guarded({}, lambda: scala_map(root.staticPartitions())),
        output_columns=output_columns,
    )


def _catalog_table_write(table_getter: str) -> Any:
    def extract(root: Any, command: str) -> WriteInfo:
        catalog_table = getattr(root, table_getter)()
        output_columns = tuple(guarded([], lambda: [str(n) for n in iterate(root.outputColumnNames())]))
        target = _catalog_relation(command, catalog_table, _output_schema(root.query(), output_columns))
        return WriteInfo(command=command, target=target, mode=guarded(None, lambda: str(root.mode())),
                         partition_columns=tuple(str(c) for c in iterate(catalog_table.partitionColumnNames())),
                         output_columns=output_columns)
    return extract


def _v2_write(root: Any, command: str) -> WriteInfo:
    target = relation_info(root.table(), simple_class(root.table()))
    output_columns = tuple(f.name for f in target.schema)
    return WriteInfo(command=command, target=target,
                     mode="Overwrite" if command != "AppendData" else "Append", output_columns=output_columns)


def _save_into_data_source(root: Any, command: str) -> WriteInfo:
    options = scala_map(root.options())
    source = simple_class(root.dataSource())
    location = options.get("path") or options.get("url", "")
    if "dbtable" in options:
        location = f"{location}/{options['dbtable']}"
    target = RelationInfo(node_class=command, paths=(location,) if location else (), format=source,
                          schema=schema_of(root.query()), options=options)
    return WriteInfo(command=command, target=target, mode=str(root.mode()),
                     output_columns=tuple(f.name for f in target.schema))


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
