"""`emitter.attach` on the shared real SparkSession: the listener, the plan dump helper, and the
events of in-process writes (faster than a child process per case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import emitter
from emitter import described as described_json
from emitter import listener as listener_module
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
    described = dumper.describe(plan)
    assert described is not None and json.loads(described[1]) == expected, "one round trip gives the leaves and the plan"
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
    attachment = emitter.attach(spark, config)
    try:
        assert attachment is not None
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
    listener = BatchListener(spark.sparkContext._gateway, WrapperDedupe(), BrokenPipeline())
    spark._jsparkSession.listenerManager().register(listener)
    try:
        spark.range(2).write.parquet(str(tmp_path / "out"))
        wait_for_listeners(spark)
    finally:
        spark._jsparkSession.listenerManager().unregister(listener)
    assert failures == ["InsertIntoHadoopFsRelationCommand"]
    assert len(listener.extraction_ms) == 1
    assert spark.read.parquet(str(tmp_path / "out")).count() == 2


def test_helper_describes_leaves_as_the_py4j_path_does(spark, tmp_path: Path):
    spark.range(3).selectExpr("id", "named_struct('a', id) AS s").write.parquet(str(tmp_path / "files"))
    spark.range(2).write.mode("overwrite").saveAsTable("described_table")
    frame = spark.read.parquet(str(tmp_path / "files")).join(spark.table("described_table"), "id")
    plan = frame._jdf.queryExecution().optimizedPlan()
    description = jvm.PlanDumper(spark.sparkContext._gateway).describe(plan)
    assert description is not None
    described = description[0]
    assert described_json.fully_described(described)
    leaves = jvm.leaves_with_subqueries(plan)
    assert [d["key"] for d in described] == [jvm.leaf_key(leaf) for leaf in leaves]
    from_helper = [described_json.described_relation(d) for d in described]
    from_py4j = [jvm.relation_info(leaf, jvm.simple_class(leaf)) for leaf in leaves]
    assert from_helper == from_py4j
    assert {info.table.qualified for info in from_helper if info.table} == {"default.described_table"}


PINNED_TABLE_SOURCE = """
public class PinnedTable {
  public Long snapshotId() { return Long.valueOf(42L); }
}
"""


def test_an_iceberg_read_pinned_by_time_travel_reports_its_pinned_snapshot_through_py4j(spark):
    """Iceberg's SparkTable holds a time-travel read's snapshot in `snapshotId()`; a table
    without that method (any other V2 table, or a current read) falls back to its properties."""
    gateway = spark.sparkContext._gateway
    compiler = gateway.jvm.org.codehaus.janino.SimpleCompiler()
    compiler.cook(PINNED_TABLE_SOURCE)
    pinned_table = (
        compiler.getClassLoader()
        .loadClass("PinnedTable")
        .getDeclaredConstructor(gateway.new_array(gateway.jvm.java.lang.Class, 0))
        .newInstance(gateway.new_array(gateway.jvm.java.lang.Object, 0))
    )
    properties = {"provider": "iceberg", "current-snapshot-id": "7"}
    assert jvm._iceberg_version(pinned_table, properties) == ("iceberg", "42")
    assert jvm._iceberg_version(gateway.jvm.java.util.HashMap(), properties) == ("iceberg", "7")
    assert jvm._iceberg_version(pinned_table, {"provider": "parquet"}) is None


def test_a_jdbc_write_is_named_by_url_and_table_and_its_password_never_leaves_the_jvm(spark, tmp_path: Path):
    events_path = tmp_path / "events.jsonl"
    config = {"namespace": "jdbc", "transport": {"type": "file", "log_file_path": str(events_path), "append": True}}
    assert emitter.attach(spark, config) is not None
    try:
        with pytest.raises(Exception):  # noqa: B017 - no database listens there: the write fails
            (
                spark.range(1)
                .write.format("jdbc")
                .option("url", "jdbc:postgresql://127.0.0.1:9/shop")
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
    """A QueryExecutionListener keeping, per write, the helper's description and the py4j one."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    def __init__(self, describer: jvm.WriteDescriber) -> None:
        self.describer = describer
        self.pairs: list[tuple[str, object, object]] = []

    def onSuccess(self, func_name: str, query_execution, duration_ns: int) -> None:
        plan = query_execution.optimizedPlan()
        command = jvm.simple_class(plan)
        described, with_metrics = self.describer.describe(query_execution, plan, command)
        if described is not None:
            assert with_metrics, "the helper knows every write of these"
            self.pairs.append((command, described, jvm.write_info(plan, command, query_execution, with_metrics=True)))

    def onFailure(self, func_name: str, query_execution, exception) -> None:
        pass


def test_write_helper_describes_each_write_as_the_py4j_calls_do(spark, tmp_path: Path):
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    recorder = _WriteRecorder(jvm.WriteDescriber(gateway))
    assert recorder.describer.helper is not None, "Janino compiled the write helper"
    ensure_callback_server_started(gateway)
    manager = spark._jsparkSession.listenerManager()
    manager.register(recorder)
    try:
        frame = spark.range(5).selectExpr("id", "cast(id AS string) AS label")
        frame.write.parquet(str(tmp_path / "plain"))
        frame.write.partitionBy("label").parquet(str(tmp_path / "partitioned"))
        frame.write.saveAsTable("write_helper_saved")
        spark.sql("CREATE TABLE write_helper_ctas USING parquet AS SELECT id FROM write_helper_saved")
        spark.sql("INSERT INTO write_helper_ctas SELECT id FROM write_helper_saved")
        wait_for_listeners(spark)
    finally:
        manager.unregister(recorder)
        spark.sql("DROP TABLE IF EXISTS write_helper_saved")
        spark.sql("DROP TABLE IF EXISTS write_helper_ctas")
    commands = {command for command, _, _ in recorder.pairs}
    assert {"InsertIntoHadoopFsRelationCommand", "CreateDataSourceTableAsSelectCommand"} <= commands
    for command, described, through_py4j in recorder.pairs:
        assert described == through_py4j, command
    assert any(described.metrics.get("numOutputRows") == 5 for _, described, _ in recorder.pairs)


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
