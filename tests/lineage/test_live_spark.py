"""The fixture expectations hold for plans captured live from this Spark (so fixtures do not rot),
read both from Spark's own `toJSON()` and from the listener's compact plan dump."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emitter.lineage import column_lineage, write_command
from emitter.listener.jvm import PlanDumper, QueryListenerRegistration
from emitter.plan import parse_plan
from tests.fixtures import capture_plans
from tests.lineage.helpers import compact, load_case, without_unread_parts

pytestmark = pytest.mark.spark

DATABASE = "lineage_live"
LIVE_CASES = [
    "join_filter",
    "aggregate_having_sort",
    "window",
    "explode",
    "posexplode_lateral_view",
    "union",
    "semi_join_in",
    "anti_join_not_exists",
    "rollup",
    "multi_count_distinct",
    "case_when",
    "scalar_subquery",
    "structs",
    "sourceless",
    "python_udf",
    "python_udtf_lateral",
    "cached",
    "masking",
    "cte",
    "python_udtf_table_arg",
    "script_transform",
    "intersect_except",
    "higher_order",
    "masking_partial",
    "conditional_aggregate",
    "existence_join",
    "offset",
    "filter_is_not_null",
    "pandas_udf",
    "map_in_pandas",
    "apply_in_pandas",
    "generator_same_name",
    "generator_other_name",
    "left_join_preserved_filter",
    "grouping_function",
    "nvl_coalesce",
]
PANDAS_CASES = {"pandas_udf", "map_in_pandas", "apply_in_pandas"}
LIVE_WRITES = ["write_insert_into", "write_partitioned_insert", "write_dataframe_partitioned_path", "write_save_as_table"]
LIVE_STREAMS = ["stream_watermark_static_join", "stream_aggregate"]


@pytest.fixture(scope="module")
def live(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The shared session, with the fixture tables in their own database (restored afterwards)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark convention

    location = tmp_path_factory.mktemp("lineage-live")
    spark.conf.set("spark.sql.debug.maxToStringFields", "10000")
    previous_database = spark.catalog.currentDatabase()
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE} LOCATION '{Path(location, DATABASE).as_posix()}'")
    spark.sql(f"USE {DATABASE}")
    cached_adults = None
    try:
        for statement in capture_plans.SETUP_SQL:
            spark.sql(statement)
        udfs = capture_plans._register_udfs(spark)
        cached_adults = spark.table("customers").where("age >= 18").select("name", "company_id", "age")
        cached_adults.cache().count()
        events_dir = location / "events"
        events_dir.mkdir()
        (events_dir / "part-0.json").write_text('{"user": "ann", "company_id": 1, "ts": "2024-01-01T00:00:00"}\n')
        yield {
            "spark": spark,
            "F": F,
            "udfs": udfs,
            "pandas": capture_plans._pandas_functions(spark),
            "cached_adults": cached_adults,
            "output_dir": str(location),
            "events_dir": str(events_dir),
            "EVENT_SCHEMA": capture_plans.EVENT_SCHEMA,
        }
    finally:
        if cached_adults is not None:
            cached_adults.unpersist()
        spark.sql(f"USE {previous_database}")
        spark.sql(f"DROP DATABASE IF EXISTS {DATABASE} CASCADE")


def _as_default_database(compacted: dict[str, Any]) -> dict[str, Any]:
    """Live tables live in DATABASE; fixtures were captured in `default`."""

    def rename(rows: list[list[Any]]) -> list[list[Any]]:
        return sorted([[row[0].replace(f"{DATABASE}.", "default."), *row[1:]] for row in rows])

    return {
        "expected": {column: rename(rows) for column, rows in compacted["expected"].items()},
        "dataset": rename(compacted["dataset"]),
    }


def _plan_texts(spark: Any, plan: Any) -> dict[str, str]:
    """The plan as Spark's toJSON() and as the compact dump, which must be the same JSON once
    toJSON()'s parts that the compact dump leaves out are dropped."""
    dumper = PlanDumper(spark.sparkContext._gateway)
    assert dumper.helper is not None, "the plan helpers did not compile"
    texts = {"toJSON": str(plan.toJSON()), "compact": dumper.to_json(plan)}
    assert without_unread_parts(json.loads(texts["toJSON"])) == json.loads(texts["compact"])
    return texts


def _cached_plans(live: dict[str, Any], plan_json: str) -> dict[int, Any]:
    cache_manager = live["spark"]._jsparkSession.sharedState().cacheManager()
    cached = cache_manager.lookupCachedData(live["cached_adults"]._jdf)
    by_key: dict[int, Any] = {}
    for node in parse_plan(plan_json).walk():
        if node.cls == "InMemoryRelation" and not cached.isEmpty():
            by_key[node.output[0].expr_id] = parse_plan(cached.get().plan().toJSON())
    return by_key


@pytest.mark.parametrize("name", LIVE_CASES)
def test_live_plan_matches_fixture_expectation(live: dict[str, Any], name: str) -> None:
    if name in PANDAS_CASES and live["spark"].version.startswith("3."):
        pytest.importorskip("pyarrow", reason="PySpark 3.5 builds pandas UDFs only with pyarrow installed")
    case = load_case(name)
    source = capture_plans.CASES[name]
    frame = live["spark"].sql(source) if isinstance(source, str) else eval(source["code"], dict(live))  # noqa: S307
    texts = _plan_texts(live["spark"], frame._jdf.queryExecution().optimizedPlan())

    for plan_json in texts.values():
        result = column_lineage(parse_plan(plan_json), _cached_plans(live, plan_json), frame.columns)
        assert _as_default_database(compact(result)) == {"expected": case["expected"], "dataset": case["dataset"]}


@pytest.mark.parametrize("name", sorted(capture_plans.ANALYZED_CASES))
def test_live_analyzed_plan_matches_fixture_expectation(live: dict[str, Any], name: str) -> None:
    frame = live["spark"].sql(capture_plans.ANALYZED_CASES[name])
    plan_json = frame._jdf.queryExecution().analyzed().toJSON()

    result = column_lineage(parse_plan(plan_json), {}, frame.columns)

    case = load_case(name)
    assert _as_default_database(compact(result)) == {"expected": case["expected"], "dataset": case["dataset"]}


@pytest.mark.parametrize("name", LIVE_WRITES)
def test_live_write_command_matches_fixture_expectation(live: dict[str, Any], name: str) -> None:
    from pyspark.java_gateway import ensure_callback_server_started

    spark = live["spark"]
    catcher = capture_plans._WriteCatcher(to_json=lambda plan: _plan_texts(spark, plan))
    ensure_callback_server_started(spark.sparkContext._gateway)
    registration = QueryListenerRegistration(spark.sparkContext._gateway, spark._jsparkSession.listenerManager(), catcher)
    statement = capture_plans.WRITE_CASES[name]
    try:
        if isinstance(statement, str):
            spark.sql(statement)
        else:
            exec(statement["code"], dict(live))  # noqa: S102 - the fixture's own code
        deadline = time.monotonic() + 30
        while not catcher.plans and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        registration.unregister()
    case = load_case(name)
    for dialect in ("toJSON", "compact"):
        commands = [write_command(parse_plan(texts[dialect])) for texts in catcher.plans]
        command = next(command for command in commands if command is not None)
        result = column_lineage(command.query, {}, command.output_columns)
        assert _as_default_database(compact(result)) == {"expected": case["expected"], "dataset": case["dataset"]}


@pytest.mark.parametrize("name", LIVE_STREAMS)
def test_live_micro_batch_plan_matches_fixture_expectation(live: dict[str, Any], name: str) -> None:
    code, output_mode = capture_plans.STREAM_CASES[name]
    frame = eval(code, dict(live))  # noqa: S307 - the fixture's own code
    query = (
        frame.writeStream.format("memory").queryName(f"live_{name}").outputMode(output_mode).trigger(availableNow=True).start()
    )
    try:
        assert query.awaitTermination(120)
        texts = _plan_texts(live["spark"], query._jsq.streamingQuery().lastExecution().optimizedPlan())
    finally:
        query.stop()
    case = load_case(name)
    for plan_json in texts.values():
        command = write_command(parse_plan(plan_json))
        assert command is not None
        result = column_lineage(command.query, {}, command.output_columns)
        assert _as_default_database(compact(result)) == {"expected": case["expected"], "dataset": case["dataset"]}
