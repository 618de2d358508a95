"""Spark session, TPC-DS catalog tables and py4j listener plumbing (the only pyspark import here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

import emitter
from benchmarks.tpcds.queries import TARGET_DATABASE, Ctas
from emitter.listener.jvm import QueryListenerRegistration

SOURCE_DATABASE = "tpcds"
DOUBLE_QUOTED_IDENTIFIERS = "spark.sql.ansi.doubleQuotedIdentifiers"
ANSI_MODE = "spark.sql.ansi.enabled"

DEFAULT_MASTER = "local[2]"

# Shared 2-core machine: keep Spark small and quiet; never truncate plan field lists.
SESSION_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.debug.maxToStringFields": "10000",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "2g",
}


def build_session(warehouse: Path, app_name: str, master: str = DEFAULT_MASTER) -> SparkSession:
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**SESSION_CONF, "spark.sql.warehouse.dir": str(warehouse)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register_tables(spark: SparkSession, tables_root: Path, table_names: list[str]) -> None:
    """External Parquet tables in database `tpcds` (the current one), plus the CTAS target database."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SOURCE_DATABASE}")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {TARGET_DATABASE}")
    for table in table_names:
        location = (tables_root / table).resolve()
        spark.sql(f"CREATE TABLE IF NOT EXISTS {SOURCE_DATABASE}.{table} USING parquet LOCATION '{location}'")
    spark.catalog.setCurrentDatabase(SOURCE_DATABASE)


def run_ctas(spark: SparkSession, statement: Ctas) -> None:
    """Run one CTAS, with double-quoted identifiers only for the queries that need them (Spark 3.5
    honours them only in ANSI mode, Spark 4's default, so these few run in ANSI mode there)."""
    quoted = statement.uses_double_quoted_identifiers
    ansi_before = spark.conf.get(ANSI_MODE, None)
    spark.conf.set(DOUBLE_QUOTED_IDENTIFIERS, str(quoted).lower())
    if quoted:
        spark.conf.set(ANSI_MODE, "true")
    try:
        spark.sql(statement.sql)
    finally:
        spark.conf.unset(DOUBLE_QUOTED_IDENTIFIERS)
        if quoted:
            if ansi_before is None:
                spark.conf.unset(ANSI_MODE)
            else:
                spark.conf.set(ANSI_MODE, ansi_before)


def drop_table(spark: SparkSession, table: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {table}")


def wait_for_listener_bus(spark: SparkSession, timeout_ms: int = 120_000) -> None:
    """Block until every queued listener event (and so every py4j callback) has been handled and
    every attached emitter has handed the events of those actions to its transport."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    if not emitter.settle():
        raise RuntimeError("the emitter's pipeline thread did not settle")


class _QueryExecutionCallback:
    """py4j proxy forwarding QueryExecutionListener callbacks to a Python function."""

    def __init__(self, handle: Callable[[str, Any, Any], None]) -> None:
        self._handle = handle

    def onSuccess(self, func_name: str, query_execution: Any, duration_ns: int) -> None:  # noqa: N802 - py4j calls the Java interface's names
        self._handle(func_name, query_execution, None)

    def onFailure(self, func_name: str, query_execution: Any, exception: Any) -> None:  # noqa: N802 - py4j calls the Java interface's names
        self._handle(func_name, query_execution, exception)

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]


@contextmanager
def query_execution_listener(spark: SparkSession, handle: Callable[[str, Any, Any], None]) -> Iterator[None]:
    """Register `handle(func_name, query_execution, exception_or_None)` for the block's duration."""
    ensure_callback_server_started(spark.sparkContext._gateway)
    callback = _QueryExecutionCallback(handle)
    registration = QueryListenerRegistration(spark.sparkContext._gateway, spark._jsparkSession.listenerManager(), callback)
    try:
        yield
    finally:
        wait_for_listener_bus(spark)
        registration.unregister()


def plan_class(plan: Any) -> str:
    return plan.getClass().getSimpleName()


def optimized_plan_json(query_execution: Any) -> str:
    return query_execution.optimizedPlan().toJSON()


def exception_text(exception: Any) -> str:
    return exception.toString() if exception is not None else ""


def jvm_pid(spark: SparkSession) -> int:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the SparkContext is stopped: no driver JVM")
    return int(jvm.java.lang.ProcessHandle.current().pid())
