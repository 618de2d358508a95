"""`emitter.attach` on the shared real SparkSession: the listener, the plan dump helper, and the
events of in-process writes (faster than a child process per case)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import emitter
from emitter import described as described_json
from emitter import listener as listener_module
from emitter.capture import TableRef
from emitter.dedupe import WRAPPER_COMMANDS
from emitter.listener import jvm
from tests.lineage.helpers import without_unread_parts
from tests.support.spark import read_events, wait_for_listeners
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark


def test_janino_helper_dumps_to_json_without_what_lineage_never_reads(spark):
    plan = spark.range(3).selectExpr("id", "id * 2 AS twice")._jdf.queryExecution().optimizedPlan()
    dumper = jvm.PlanDumper(spark.sparkContext._gateway)
    assert dumper.helper is not None, "Janino compiled the helper"
    expected = without_unread_parts(json.loads(plan.toJSON()))
    assert json.loads(dumper.to_json(plan)) == expected
    assert json.loads(dumper.describe(plan).plan_json) == expected, "one round trip gives the leaves and the plan"
    assert jvm.PlanDumper(spark.sparkContext._gateway, compact=False).to_json(plan) == plan.toJSON()


def test_conf_switch_disables_attach(spark):
    spark.conf.set("spark.openlineage.disabled", "true")
    try:
        assert emitter.attach(spark) is None
    finally:
        spark.conf.unset("spark.openlineage.disabled")
    assert listener_module._session_key(spark) not in listener_module._attachments


def test_attach_emits_one_run_per_write_and_completes_the_app_on_close(spark, tmp_path: Path):
    events_path = tmp_path / "events.jsonl"
    config = {"namespace": "inproc", "transport": {"type": "file", "log_file_path": str(events_path), "append": True}}
    users_own = spark.conf.get("spark.sql.debug.maxToStringFields", None)  # set by an earlier test, or not
    listeners_before = _query_listeners(spark)
    attachment = emitter.attach(spark, config)
    try:
        assert attachment is not None
        assert _query_listeners(spark) == [*listeners_before, jvm.REGISTRATION_CLASS]
        assert emitter.attach(spark, config) is attachment, "attaching twice registers once"
        raised = spark.conf.get("spark.sql.debug.maxToStringFields")
        assert raised == (users_own or listener_module.MAX_TO_STRING_FIELDS), "raised unless the user set it"
        source = tmp_path / "source"
        spark.range(4).selectExpr("id", "cast(id AS string) AS label").write.parquet(str(source))
        spark.read.parquet(str(source)).selectExpr("id", "upper(label) AS label").write.mode("overwrite").saveAsTable(
            "attach_upper"
        )
        spark.read.parquet(str(source)).count()
        wait_for_listeners(spark)
    finally:
        listener_module.close_session(spark)
    assert spark.conf.get("spark.sql.debug.maxToStringFields", None) == users_own, "as it was again after close"
    assert _query_listeners(spark) == listeners_before, "closing removes the listener it registered"
    events = read_events(events_path)
    for event in events:
        assert_valid_event(event)
    assert [e["eventType"] for e in events if e["job"]["name"] == "tests"] == ["START", "COMPLETE"]
    actions = [e for e in events if e["job"]["name"] != "tests"]
    assert {e["job"]["namespace"] for e in events} == {"inproc"}
    assert [(e["job"]["name"], e["eventType"]) for e in actions] == [
        (
            f"tests.insert_into_hadoop_fs_relation_command.{str(tmp_path / 'source').strip('/').replace('/', '_').replace('-', '_').lower()}",
            "START",
        ),
        (actions[0]["job"]["name"], "COMPLETE"),
        ("tests.create_data_source_table_as_select_command.default_attach_upper", "START"),
        ("tests.create_data_source_table_as_select_command.default_attach_upper", "COMPLETE"),
    ]
    table_write = actions[-1]
    assert table_write["inputs"][0]["name"] == str(source)
    lineage = table_write["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert [(f["field"], f["transformations"][0]["subtype"]) for f in lineage["label"]["inputFields"]] == [
        ("label", "TRANSFORMATION")
    ]
    assert table_write["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 4


def _query_listeners(spark) -> list[str]:
    """The JVM class of each of the session's QueryExecutionListeners (a listener another test left
    registered in Python is a py4j proxy, which may have no name to ask for)."""
    return [str(listener.getClass().getName()) for listener in spark._jsparkSession.listenerManager().listListeners()]


def test_listener_survives_plans_it_cannot_read(spark, tmp_path: Path):
    """A broken handler never reaches the job: the write succeeds and nothing is raised."""
    failures: list[str] = []

    class BrokenPipeline:
        closed = False

        def handle_actions(self, actions):
            failures.extend(capture.root_class for capture in actions)
            raise RuntimeError("pipeline bug")

    from pyspark.java_gateway import ensure_callback_server_started

    from emitter.dedupe import WrapperDedupe
    from emitter.listener.batch import BatchListener

    ensure_callback_server_started(spark.sparkContext._gateway)
    listeners_before = _query_listeners(spark)
    listener = BatchListener(spark.sparkContext._gateway, WrapperDedupe(), BrokenPipeline())
    registration = jvm.QueryListenerRegistration(spark.sparkContext._gateway, spark._jsparkSession.listenerManager(), listener)
    try:
        spark.range(2).write.parquet(str(tmp_path / "out"))
        wait_for_listeners(spark)
    finally:
        registration.unregister()
    assert _query_listeners(spark) == listeners_before, "no later test's action reaches the broken pipeline"
    assert failures == ["InsertIntoHadoopFsRelationCommand"]
    assert len(listener.extraction_ms) == 1
    assert spark.read.parquet(str(tmp_path / "out")).count() == 2


DERBY_CATALOG = "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"


@pytest.fixture
def derby(spark, tmp_path: Path):
    """An in-memory Derby database (Spark ships its JDBC driver) as a JDBC source and as the
    DataSource V2 catalog `derby` (Spark's JDBCTableCatalog)."""
    url = f"jdbc:derby:memory:{tmp_path.name};create=true"
    spark.conf.set("spark.sql.catalog.derby", DERBY_CATALOG)
    spark.conf.set("spark.sql.catalog.derby.url", url)
    try:
        yield url
    finally:
        spark.conf.unset("spark.sql.catalog.derby")
        spark.conf.unset("spark.sql.catalog.derby.url")


def _described_leaves(spark, frame):
    described = jvm.PlanDumper(spark.sparkContext._gateway).describe(frame._jdf.queryExecution().optimizedPlan())
    assert described.errors == ()
    return described, described_json.described_leaves(described)


def test_the_helper_describes_each_kind_of_relation_a_read_names(spark, tmp_path: Path, derby: str):
    """Files, catalog tables, JDBC tables, DataSource V2 tables and cached DataFrames are each
    named from the one helper call (there is no other path to fall back to)."""
    spark.range(3).selectExpr("id", "named_struct('a', id) AS s", "id % 2 AS part").write.partitionBy("part").parquet(
        str(tmp_path / "files")
    )
    spark.range(2).write.mode("overwrite").saveAsTable("described_table")
    spark.range(2).selectExpr("id", "'x' AS label").write.jdbc(derby, "ORDERS", properties={"password": "hunter2"})
    spark.sql("CREATE TABLE derby.APP.V2_TABLE (id BIGINT, label STRING)")
    cached = spark.read.parquet(str(tmp_path / "files")).where("id > 0").select("id", "part").cache()
    try:
        cached.count()
        frame = (
            spark.read.parquet(str(tmp_path / "files"))
            .join(spark.table("described_table"), "id")
            .join(spark.read.jdbc(derby, "ORDERS", properties={"password": "hunter2"}), "id")
            .join(spark.table("derby.APP.V2_TABLE").where("id > 0"), "id")
            .join(cached, "id")
        )
        described, (leaves, cached_plans) = _described_leaves(spark, frame)
    finally:
        cached.unpersist()
        spark.sql("DROP TABLE IF EXISTS described_table")
        spark.sql("DROP TABLE IF EXISTS derby.APP.V2_TABLE")
    assert "hunter2" not in json.dumps(described.leaves), "no option but those naming a dataset leaves the JVM"
    by_kind = {(info.node_class, info.format): info for info in leaves.values()}
    files = by_kind[("LogicalRelation", "parquet")]
    assert files.paths == (f"file:{tmp_path / 'files'}",) and files.partition_columns == ("part",)
    assert [f.name for f in files.schema] == ["id", "s", "part"] and files.schema[1].fields[0].name == "a"
    table = next(info for info in leaves.values() if info.table is not None and info.table.name == "described_table")
    assert (table.table.qualified, table.format) == ("default.described_table", "parquet")
    assert table.table_location is not None and table.table_location.endswith("described_table")
    assert by_kind[("LogicalRelation", "jdbc")].paths == (f"jdbc:derby:///{tmp_path.name}/ORDERS",)
    v2 = by_kind[("DataSourceV2ScanRelation", None)]
    assert v2.table == TableRef("V2_TABLE", "APP", "derby") and [f.name for f in v2.schema] == ["id", "label"]
    [cached_json] = cached_plans.values()
    assert "LogicalRelation" in cached_json, "the cached DataFrame's plan, for its column lineage"
    assert sum(1 for info in leaves.values() if info.paths == files.paths) == 2, "the cached plan's leaf has a key of its own"


ICEBERG_LIKE_TABLE_SOURCE = """
public class IcebergLikeTable {
  String pinned;
  public IcebergLikeTable(String pinned) { this.pinned = pinned; }
  public String name() { return "lake.db.events"; }
  public java.util.Map properties() {
    java.util.Map properties = new java.util.HashMap();
    properties.put("provider", "iceberg");
    properties.put("current-snapshot-id", "7");
    properties.put("location", "s3://lake/db/events");
    properties.put("write.token", "not copied");
    return properties;
  }
  public Long snapshotId() { return pinned == null ? null : Long.valueOf(pinned); }
}
"""


def test_an_iceberg_table_is_versioned_by_its_current_snapshot_or_the_one_a_read_is_pinned_to(spark):
    """Iceberg's SparkTable lists its current snapshot among its properties and holds a
    time-travel read's snapshot in `snapshotId()`: the helper reads both (by name, without
    Iceberg on the classpath here)."""
    from emitter.listener import janino

    gateway = spark.sparkContext._gateway
    compiler = gateway.jvm.org.codehaus.janino.SimpleCompiler()
    compiler.cook(ICEBERG_LIKE_TABLE_SOURCE)
    table_class = compiler.getClassLoader().loadClass("IcebergLikeTable")
    relations = janino.class_loader(gateway).loadClass("SparkLineageRelations")
    describe = relations.getMethod("describeV2Table", _classes(gateway, "java.lang.Object"))

    def described(pinned):
        constructor = table_class.getConstructor(_classes(gateway, "java.lang.String"))
        arguments = gateway.new_array(gateway.jvm.java.lang.Object, 1)
        arguments[0] = pinned
        table = constructor.newInstance(arguments)
        call = gateway.new_array(gateway.jvm.java.lang.Object, 1)
        call[0] = table
        text = describe.invoke(None, call)
        assert "not copied" not in text
        return described_json.described_relation(json.loads(text))

    current, pinned = described(None), described("42")
    assert current.table == TableRef("lake.db.events") and current.table_location == "s3://lake/db/events"
    assert (current.format, current.table_version) == ("iceberg", ("iceberg", "7"))
    assert pinned.table_version == ("iceberg", "42")


def _classes(gateway, *classes):
    array = gateway.new_array(gateway.jvm.java.lang.Class, len(classes))
    for index, cls in enumerate(classes):
        array[index] = gateway.jvm.java.lang.Class.forName(cls) if isinstance(cls, str) else cls
    return array


def test_a_jdbc_write_is_named_by_url_and_table_and_its_password_never_leaves_the_jvm(spark, tmp_path: Path):
    events_path = tmp_path / "events.jsonl"
    config = {"namespace": "jdbc", "transport": {"type": "file", "log_file_path": str(events_path), "append": True}}
    assert emitter.attach(spark, config) is not None
    try:
        with pytest.raises(Exception):  # noqa: B017 - no database listens there: the write fails
            (
                spark.range(1)
                .write.format("jdbc")
                .option("url", "jdbc:postgresql://127.0.0.1:9/shop?user=etl&password=hunter2-in-url")
                .option("dbtable", "public.orders")
                .option("user", "etl")
                .option("password", "hunter2-secret")
                .save()
            )
        wait_for_listeners(spark)
    finally:
        listener_module.close_session(spark)
    text = events_path.read_text()
    assert "hunter2" not in text
    [failed] = [e for e in read_events(events_path) if e["eventType"] == "FAIL"]
    assert [(o["namespace"], o["name"]) for o in failed["outputs"]] == [("postgres://127.0.0.1:9", "shop.public.orders")]


def test_only_the_options_that_name_a_dataset_are_copied_out_of_the_jvm(spark):
    options = spark._jvm.java.util.HashMap()
    for key, value in {"url": "jdbc:postgresql://db/shop", "dbtable": "orders", "password": "x", "user": "u"}.items():
        options.put(key, value)
    scala_options = spark._jvm.scala.collection.JavaConverters.mapAsScalaMap(options)
    assert jvm.naming_options(scala_options) == {"url": "jdbc:postgresql://db/shop", "dbtable": "orders"}


class _WriteRecorder:
    """A QueryExecutionListener keeping the helper's description of each write."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    def __init__(self, describer: jvm.ActionDescriber, dumper: jvm.PlanDumper) -> None:
        self.describer, self.dumper = describer, dumper
        self.writes: list[object] = []

    def onSuccess(self, func_name: str, query_execution, duration_ns: int) -> None:
        described = self.describer.write_of(self.describer.describe(query_execution, self.dumper))
        if described is not None:
            self.writes.append(described)

    def onFailure(self, func_name: str, query_execution, exception) -> None:
        pass


def test_the_write_helper_describes_each_kind_of_write(spark, tmp_path: Path, derby: str):
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    describer = jvm.ActionDescriber(gateway, jvm.WriteDescriber(gateway), None, WRAPPER_COMMANDS, emit_reads=False)
    recorder = _WriteRecorder(describer, jvm.PlanDumper(gateway))
    assert recorder.describer.helper is not None, "Janino compiled the write helper"
    ensure_callback_server_started(gateway)
    registration = jvm.QueryListenerRegistration(gateway, spark._jsparkSession.listenerManager(), recorder)
    try:
        frame = spark.range(5).selectExpr("id", "cast(id AS string) AS label")
        frame.write.parquet(str(tmp_path / "plain"))
        frame.write.saveAsTable("write_helper_saved")
        spark.sql("CREATE TABLE write_helper_ctas USING parquet AS SELECT id FROM write_helper_saved")
        spark.sql("INSERT INTO write_helper_ctas SELECT id FROM write_helper_saved")
        frame.write.jdbc(derby, "JDBC_TARGET", properties={"password": "hunter2"})
        spark.sql("CREATE TABLE derby.APP.V2_TARGET (id BIGINT, label STRING)")
        spark.sql("INSERT INTO derby.APP.V2_TARGET SELECT id, cast(id AS string) FROM range(3)")
        spark.sql("INSERT OVERWRITE derby.APP.V2_TARGET SELECT id, cast(id AS string) FROM range(2)")
        spark.sql("SELECT count(*) FROM write_helper_saved").collect()
        wait_for_listeners(spark)
    finally:
        registration.unregister()
        spark.sql("DROP TABLE IF EXISTS write_helper_saved")
        spark.sql("DROP TABLE IF EXISTS write_helper_ctas")
        spark.sql("DROP TABLE IF EXISTS derby.APP.V2_TARGET")
    writes = {(w.command, w.target.table.name if w.target.table else w.target.paths[0]): w for w in recorder.writes}
    plain = writes[("InsertIntoHadoopFsRelationCommand", f"file:{tmp_path / 'plain'}")]
    assert (plain.target.format, plain.mode, plain.output_columns) == ("parquet", "ErrorIfExists", ("id", "label"))
    assert plain.metrics["numOutputRows"] == 5 and plain.metrics["numFiles"] >= 1
    saved = writes[("CreateDataSourceTableAsSelectCommand", "write_helper_saved")]
    assert (saved.target.table.qualified, saved.target.format, saved.mode) == (
        "default.write_helper_saved",
        "parquet",
        "ErrorIfExists",
    )
    assert [f.name for f in saved.target.schema] == ["id", "label"]
    assert ("CreateDataSourceTableAsSelectCommand", "write_helper_ctas") in writes
    inserted = writes[("InsertIntoHadoopFsRelationCommand", "write_helper_ctas")]
    assert (inserted.target.table.name, inserted.mode, inserted.metrics["numOutputRows"]) == ("write_helper_ctas", "Append", 5)
    jdbc = writes[("SaveIntoDataSourceCommand", f"jdbc:derby:///{tmp_path.name}/JDBC_TARGET")]
    assert (jdbc.target.format, jdbc.mode, jdbc.output_columns) == ("JdbcRelationProvider", "ErrorIfExists", ("id", "label"))
    appended, overwritten = writes[("AppendData", "V2_TARGET")], writes[("OverwriteByExpression", "V2_TARGET")]
    assert appended.target.table == TableRef("V2_TARGET", "APP", "derby") and appended.mode == "Append"
    assert overwritten.mode == "Overwrite" and overwritten.output_columns == ("id", "label")
    assert {w.command for w in recorder.writes} - {"SaveAsV1TableCommand"} == {  # Spark 4's saveAsTable, around the CTAS
        "InsertIntoHadoopFsRelationCommand",
        "CreateDataSourceTableAsSelectCommand",
        "SaveIntoDataSourceCommand",
        "AppendData",
        "OverwriteByExpression",
    }, "a read is no write"


def test_what_attach_hooks_outside_the_attachment_is_undone_when_the_last_one_closes(spark, tmp_path: Path):
    from openlineage.client.transport import get_default_factory

    session_class = type(spark)
    stop_before = session_class.stop
    factory_before = dict(get_default_factory().transports)
    users_own = spark.conf.get("spark.sql.debug.maxToStringFields", None)
    spark.conf.set("spark.sql.debug.maxToStringFields", "77")  # the user's own setting
    config = {"transport": {"type": "file", "log_file_path": str(tmp_path / "events.jsonl"), "append": True}}
    other = spark.newSession()
    try:
        first, second = emitter.attach(spark, config), emitter.attach(other, config)
        assert first is not None and second is not None
        assert session_class.stop is not stop_before, "stop completes the application run while attached"
        assert listener_module._hooks.exit_hook_registered, "one exit hook (close_all) for every attachment"
        assert spark.conf.get("spark.sql.debug.maxToStringFields") == "77", "the user's setting is kept"
        assert other.conf.get("spark.sql.debug.maxToStringFields") == listener_module.MAX_TO_STRING_FIELDS
        assert dict(get_default_factory().transports) == factory_before, "openlineage-python's factory is not changed"
        listener_module.close_session(spark)
        assert session_class.stop is not stop_before, "another attachment still lives"
    finally:
        listener_module.close_session(other)
        if users_own is None:
            spark.conf.unset("spark.sql.debug.maxToStringFields")
        else:
            spark.conf.set("spark.sql.debug.maxToStringFields", users_own)
    assert session_class.stop is stop_before
    assert not listener_module._hooks.exit_hook_registered
    assert other.conf.get("spark.sql.debug.maxToStringFields", None) is None


def test_the_conf_opt_out_leaves_max_to_string_fields_alone(spark, tmp_path: Path):
    config = {"transport": {"type": "file", "log_file_path": str(tmp_path / "events.jsonl")}, "raiseMaxToStringFields": False}
    session = spark.newSession()
    try:
        assert emitter.attach(session, config) is not None
        assert session.conf.get("spark.sql.debug.maxToStringFields", None) is None
    finally:
        listener_module.close_session(session)


def test_every_java_helper_compiles_and_instantiates(spark):
    """A broken helper fails here, not as a quiet fallback in a user's run: the sources are compiled
    afresh (not the per-JVM cache) and every class they declare loads and instantiates."""
    from importlib import resources

    from emitter.listener import janino

    gateway = spark.sparkContext._gateway
    compiler = gateway.jvm.org.codehaus.janino.SimpleCompiler()
    compiler.setParentClassLoader(gateway.jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    compiler.cook(janino.java_source())
    loader = compiler.getClassLoader()
    names = sorted(
        r.name.removesuffix(".java") for r in resources.files(janino.JAVA_PACKAGE).iterdir() if r.name.endswith(".java")
    )
    assert len(names) >= 7
    for name in names:
        assert loader.loadClass(name).newInstance() is not None, name


def test_a_ctas_callback_makes_no_jvm_call_and_an_action_writing_nothing_calls_no_python(spark, tmp_path: Path):
    """The listener bus waits while a callback runs, and every py4j call is a round trip between
    two processes: the listener's JVM registration describes the action before it calls Python
    and hands the description over with the callback. A CTAS gives two callbacks, its nested data
    write (with the plan) and its wrapper (merged into it): neither calls back into the JVM. An
    action that writes nothing (reads are not emitted) does not reach Python at all."""
    events_path = tmp_path / "events.jsonl"
    spark.range(3).write.parquet(str(tmp_path / "source"))
    spark.sql(f"CREATE TABLE round_trip_source USING parquet LOCATION '{tmp_path / 'source'}'")
    attachment = emitter.attach(spark, {"transport": {"type": "file", "log_file_path": str(events_path), "append": True}})
    assert attachment is not None
    listener = attachment.listener
    original = listener.capture
    round_trips: list[tuple[str, list[str]]] = []
    called: list[str] = []

    def capture(call, query_execution, duration_ns, exception):
        client = listener.gateway._gateway_client
        listener_bus = threading.current_thread()
        calls: list[str] = []
        send_command = client.send_command

        def counted(command, *args, **kwargs):
            if threading.current_thread() is listener_bus:  # not the test's own calls meanwhile
                calls.append(" ".join(command.split("\n")[:3]))
            return send_command(command, *args, **kwargs)

        client.send_command = counted
        try:
            captured = original(call, query_execution, duration_ns, exception)
        finally:
            del client.send_command  # the class's method again
        called.append(call.func_name)
        if captured is not None:
            round_trips.append((captured.write.command if captured.write else call.func_name, calls))
        return captured

    listener.capture = capture
    try:
        spark.sql("CREATE TABLE round_trip_ctas USING parquet AS SELECT id * 2 AS twice FROM round_trip_source")
        spark.sql("SELECT count(*) FROM round_trip_source").collect()
        spark.sql("DROP TABLE IF EXISTS round_trip_missing")
        wait_for_listeners(spark)
    finally:
        listener_module.close_session(spark)
        spark.sql("DROP TABLE IF EXISTS round_trip_ctas")
        spark.sql("DROP TABLE IF EXISTS round_trip_source")
    assert [(command, len(calls)) for command, calls in round_trips] == [
        ("InsertIntoHadoopFsRelationCommand", 0),
        ("CreateDataSourceTableAsSelectCommand", 0),
    ], round_trips
    assert len(called) == 2, f"only the two callbacks of the write reached Python: {called}"
    assert all(capture_ms > 0 for capture_ms in listener.extraction_ms), "the JVM's describing is counted"
    runs = [event for event in read_events(events_path) if event["job"]["name"].endswith("round_trip_ctas")]
    assert [event["eventType"] for event in runs] == ["START", "COMPLETE"], "the wrapper merged into its nested write"
    assert runs[-1]["outputs"][0]["facets"]["columnLineage"]["fields"]["twice"]["inputFields"][0]["field"] == "id"
