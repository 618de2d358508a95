"""End to end: unmodified PySpark scripts run by `python -m emitter run`, events read back from
the file transport. One script covers the write APIs and the lineage constructs (it runs once
per module); smaller ones cover failure, the disabled switch and exit codes."""

from __future__ import annotations

import re
import textwrap
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark import read_events, run_under_emitter, script_prelude
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

APP = "E2E Job"
APP_JOB = "e2e_job"

MAIN_SCRIPT = """
import sys
from pyspark.sql import functions as F, Window
from pyspark.sql.types import StringType

base = sys.argv[1]
customers = spark.createDataFrame(
    [(1, "Ann", "ann@x.com", ("Paris", "FR")), (2, "Bob", "bob@y.org", ("Oslo", "NO"))],
    "id long, name string, email string, address struct<city:string,country:string>",
)
customers.write.mode("overwrite").parquet(f"{base}/customers")
orders = spark.createDataFrame(
    [(10, 1, "2024-01-01", 5.0, "a,b"), (11, 1, "2024-01-02", 7.5, "c"), (12, 2, "2024-01-02", 3.0, "a")],
    "order_id long, customer_id long, day string, amount double, items string",
)
orders.write.mode("overwrite").format("json").save(f"{base}/orders")

c = spark.read.parquet(f"{base}/customers")
o = spark.read.json(f"{base}/orders")
domain = F.udf(lambda email: email.split("@")[1], StringType())
enriched = o.join(c, o.customer_id == c.id).select(
    o.order_id, c.name, domain(c.email).alias("domain"), o.amount, o.day, o.items, c.address
)
enriched.write.mode("overwrite").saveAsTable("enriched")
spark.sql("CREATE TABLE totals USING parquet AS SELECT name, sum(amount) AS total FROM enriched GROUP BY name")

by_day = Window.partitionBy("name").orderBy("day")
ranked = spark.table("enriched").withColumn("rn", F.row_number().over(by_day)).select("order_id", "name", "rn")
ranked.write.mode("overwrite").partitionBy("name").parquet(f"{base}/ranked")

items = spark.table("enriched").select("order_id", F.explode(F.split("items", ",")).alias("item")).cache()
items.count()
items.write.mode("overwrite").saveAsTable("items")

spark.sql("CREATE TABLE people (id long, who string) USING parquet")
spark.sql(f"INSERT INTO people SELECT id, name FROM parquet.`{base}/customers` UNION ALL SELECT order_id, name FROM enriched")
spark.table("enriched").select("name", "amount").write.insertInto("totals")
spark.sql("INSERT OVERWRITE TABLE totals SELECT name, max(amount) FROM enriched GROUP BY name")
spark.read.parquet(f"{base}/customers").collect()
print("script finished", sys.argv[2:])
"""  # no spark.stop(): nothing may be lost when a script just ends


def _write_script(tmp_path: Path, name: str, body: str, app: str = APP) -> Path:
    script = tmp_path / name
    script.write_text(script_prelude(app, tmp_path / "warehouse") + textwrap.dedent(body))
    return script


@pytest.fixture(scope="module")
def main_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("e2e")
    data = tmp_path / "data"
    script = _write_script(tmp_path, "job.py", MAIN_SCRIPT)
    events_path = tmp_path / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(data), "--flag", "x"))
    return {"result": result, "events": read_events(events_path), "data": data, "tmp": tmp_path}


def _runs(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event)
    return runs


def _complete(events: list[dict[str, Any]], job_name: str) -> dict[str, Any]:
    found = [e for e in events if e["job"]["name"] == job_name and e["eventType"] == "COMPLETE"]
    assert found, f"no COMPLETE event for {job_name}; jobs: {sorted({e['job']['name'] for e in events})}"
    return found[-1]


def _path_job(data: Path, leaf: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(data / leaf).lower()).strip("_")


def _fields(event: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    facet = event["outputs"][0]["facets"]["columnLineage"]
    return {name: value["inputFields"] for name, value in facet["fields"].items()}


def _inputs_of(event: dict[str, Any], column: str) -> set[tuple[str, str, str]]:
    return {(Path(f["name"]).name, f["field"], t["subtype"]) for f in _fields(event)[column] for t in f["transformations"]}


def test_script_output_and_exit_code_are_unchanged(main_run):
    result = main_run["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "script finished ['--flag', 'x']" in result.stdout


def test_every_event_is_valid_openlineage(main_run):
    assert main_run["events"]
    for event in main_run["events"]:
        assert_valid_event(event)


def test_one_run_per_write_action_with_start_then_complete(main_run):
    data = main_run["data"]
    events = main_run["events"]
    action_runs = [run for run in _runs(events).values() if run[0]["job"]["name"] != APP_JOB]
    assert all([e["eventType"] for e in run] == ["START", "COMPLETE"] for run in action_runs)
    per_job = Counter(run[0]["job"]["name"] for run in action_runs)
    assert per_job == {
        f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'customers')}": 1,
        f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'orders')}": 1,
        f"{APP_JOB}.create_data_source_table_as_select_command.default_enriched": 1,  # saveAsTable
        f"{APP_JOB}.create_data_source_table_as_select_command.default_totals": 1,  # CTAS
        f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'ranked')}": 1,
        f"{APP_JOB}.create_data_source_table_as_select_command.default_items": 1,
        f"{APP_JOB}.insert_into_hadoop_fs_relation_command.default_people": 1,  # INSERT INTO
        f"{APP_JOB}.insert_into_hadoop_fs_relation_command.default_totals": 2,  # insertInto + INSERT OVERWRITE
    }, "reads (count, collect) and DDL emit nothing; nested commands are one run"


def test_application_run_is_the_parent_of_every_action(main_run):
    events = main_run["events"]
    app_events = [e for e in events if e["job"]["name"] == APP_JOB]
    assert [e["eventType"] for e in app_events] == ["START", "COMPLETE"]
    assert events[0] is app_events[0] and events[-1] is app_events[1], "app run brackets the actions"
    app_run_id = app_events[0]["run"]["runId"]
    for event in events:
        if event["job"]["name"] == APP_JOB:
            continue
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == app_run_id
        assert (parent["job"]["namespace"], parent["job"]["name"]) == ("default", APP_JOB)
        assert parent["root"]["run"]["runId"] == app_run_id
        assert event["job"]["facets"]["jobType"]["processingType"] == "BATCH"
        assert event["job"]["facets"]["jobType"]["integration"] == "SPARK"
        assert event["run"]["facets"]["processing_engine"]["name"] == "spark"


def test_start_precedes_complete_by_the_action_duration(main_run):
    for run in _runs(main_run["events"]).values():
        times = [e["eventTime"] for e in run]
        assert times == sorted(times)


def test_file_datasets_are_named_by_the_naming_spec(main_run):
    data = main_run["data"]
    event = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_enriched")
    assert {(d["namespace"], d["name"]) for d in event["inputs"]} == {
        ("file", str(data / "customers")),
        ("file", str(data / "orders")),
    }
    [output] = event["outputs"]
    warehouse = main_run["tmp"] / "warehouse"
    assert (output["namespace"], output["name"]) == ("file", str(warehouse / "enriched"))
    assert output["facets"]["symlinks"]["identifiers"] == [
        {"namespace": f"file:{warehouse}", "name": "default.enriched", "type": "TABLE"}
    ]
    assert output["facets"]["dataSource"]["name"] == "file"


def test_catalog_tables_read_back_carry_their_symlink(main_run):
    event = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_totals")
    [source] = event["inputs"]
    assert source["name"].endswith("/enriched")
    assert source["facets"]["symlinks"]["identifiers"][0]["name"] == "default.enriched"


def test_schema_facet_keeps_nested_struct_fields(main_run):
    data = main_run["data"]
    event = _complete(main_run["events"], f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'customers')}")
    fields = {f["name"]: f for f in event["outputs"][0]["facets"]["schema"]["fields"]}
    assert fields["id"]["type"] == "long"
    assert fields["address"]["type"] == "struct"
    assert [(f["name"], f["type"]) for f in fields["address"]["fields"]] == [("city", "string"), ("country", "string")]


def test_output_statistics_count_rows_and_files(main_run):
    data = main_run["data"]
    event = _complete(main_run["events"], f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'orders')}")
    stats = event["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 3
    assert stats["size"] > 0 and stats["fileCount"] >= 1
    enriched = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_enriched")
    assert enriched["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_column_lineage_through_join_and_python_udf(main_run):
    event = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_enriched")
    assert _inputs_of(event, "order_id") == {("orders", "order_id", "IDENTITY")}
    assert _inputs_of(event, "domain") == {("customers", "email", "TRANSFORMATION")}
    assert _inputs_of(event, "address") == {("customers", "address", "IDENTITY")}
    dataset = event["outputs"][0]["facets"]["columnLineage"]["dataset"]
    joins = {(Path(f["name"]).name, f["field"]) for f in dataset for t in f["transformations"] if t["subtype"] == "JOIN"}
    assert joins == {("orders", "customer_id"), ("customers", "id")}


def test_column_lineage_of_aggregate(main_run):
    event = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_totals")
    assert _inputs_of(event, "total") == {("enriched", "amount", "AGGREGATION")}
    dataset = event["outputs"][0]["facets"]["columnLineage"]["dataset"]
    assert {(f["field"], t["subtype"]) for f in dataset for t in f["transformations"]} == {("name", "GROUP_BY")}


def test_column_lineage_of_window_and_partition_column(main_run):
    data = main_run["data"]
    event = _complete(main_run["events"], f"{APP_JOB}.insert_into_hadoop_fs_relation_command.{_path_job(data, 'ranked')}")
    assert {("enriched", "name", "WINDOW"), ("enriched", "day", "WINDOW")} <= _inputs_of(event, "rn")
    # the partitionBy column stays an identity although Spark wraps it in empty2null for the write
    assert _inputs_of(event, "name") == {("enriched", "name", "IDENTITY")}


def test_column_lineage_of_explode_through_a_cached_dataframe(main_run):
    event = _complete(main_run["events"], f"{APP_JOB}.create_data_source_table_as_select_command.default_items")
    assert {(Path(d["name"]).name) for d in event["inputs"]} == {"enriched"}, "the cache resolves to its source"
    assert _inputs_of(event, "item") == {("enriched", "items", "TRANSFORMATION")}
    assert _inputs_of(event, "order_id") == {("enriched", "order_id", "IDENTITY")}


def test_column_lineage_of_union_insert(main_run):
    event = _complete(main_run["events"], f"{APP_JOB}.insert_into_hadoop_fs_relation_command.default_people")
    assert _inputs_of(event, "who") == {("customers", "name", "IDENTITY"), ("enriched", "name", "IDENTITY")}
    assert _inputs_of(event, "id") == {("customers", "id", "IDENTITY"), ("enriched", "order_id", "IDENTITY")}


FAILING_SCRIPT = """
import sys
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

def explode_with_secret(value):
    raise ValueError("cannot reach the service with token=hunter2 password=hunter2")

try:
    spark.range(3).select(F.udf(explode_with_secret, StringType())("id").alias("v")).write.mode("overwrite").parquet(sys.argv[1])
finally:
    print("before stop")
    spark.stop()
"""


def test_failing_script_gives_fail_event_and_same_exit_code(tmp_path):
    script = _write_script(tmp_path, "failing.py", FAILING_SCRIPT, app="Failing Job")
    events_path = tmp_path / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(tmp_path / "out"),))
    assert result.returncode == 1, "an uncaught exception exits with 1, as under plain python"
    assert "before stop" in result.stdout
    assert "Traceback" in result.stderr and "PythonException" in result.stderr
    events = read_events(events_path)
    for event in events:
        assert_valid_event(event)
    [failed] = [e for e in events if e["eventType"] == "FAIL"]
    assert failed["job"]["name"].startswith("failing_job.insert_into_hadoop_fs_relation_command.")
    error = failed["run"]["facets"]["errorMessage"]
    assert "cannot reach the service" in error["message"] + error.get("stackTrace", "")
    assert "hunter2" not in events_path.read_text(), "secrets are redacted in every facet"
    assert [e["eventType"] for e in events if e["job"]["name"] == "failing_job"] == ["START", "COMPLETE"], (
        "spark.stop() completes the application run"
    )


SMALL_WRITE = """
import sys
spark.range(2).write.mode("overwrite").parquet(sys.argv[1])
print("wrote")
"""


def test_disabled_switch_emits_nothing_and_leaves_the_job_alone(tmp_path):
    script = _write_script(tmp_path, "small.py", SMALL_WRITE, app="Disabled Job")
    events_path = tmp_path / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(tmp_path / "out"),), env={"OPENLINEAGE_DISABLED": "true"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "wrote" in result.stdout
    assert (tmp_path / "out").is_dir()
    assert read_events(events_path) == []


EXITING_SCRIPT = """
import sys
spark.range(2).write.mode("overwrite").parquet(sys.argv[1])
sys.exit(3)
"""


def test_sys_exit_code_propagates_after_events_are_flushed(tmp_path):
    script = _write_script(tmp_path, "exiting.py", EXITING_SCRIPT, app="Exit Job")
    events_path = tmp_path / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(tmp_path / "out"),))
    assert result.returncode == 3
    assert [(e["job"]["name"].split(".")[0], e["eventType"]) for e in read_events(events_path)] == [
        ("exit_job", "START"),
        ("exit_job", "START"),
        ("exit_job", "COMPLETE"),
        ("exit_job", "COMPLETE"),
    ]
