"""A real Spark session with Apache Iceberg for the live lakehouse tests (`tests/lakehouse/`).

Iceberg's Spark runtime must be on the driver's classpath when its JVM starts (`spark.jars`), and a
pytest process may already run another session's JVM (the shared `spark` fixture of
`tests.support.spark`): so the Iceberg session lives in a child process of its own, one per test
module (`iceberg` fixture). It has the runtime jar the project pins for this PySpark's Spark version
(the jar set `iceberg-spark-<major.minor>`, jars/pom.xml), Iceberg's SQL extensions, a Hadoop catalog
`lake` whose warehouse is a temporary directory, and the emitter attached, writing its events to a
JSON-lines file the test reads (`IcebergSession.events`). Test code runs in the child through
`IcebergSession.call(function, *args)`: `function(spark, *args)`, a module-level function (it is
pickled by name), returns plain data.

A Spark version Iceberg publishes no runtime for skips the tests, whatever LINEAGE_REQUIRE_ALL says
(nothing can be installed to run them); a runtime Maven cannot fetch is a missing dependency:
skipped, or failed under LINEAGE_REQUIRE_ALL=1.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import jars
from tests.support.require import skip_or_fail
from tests.support.spark import read_events, require_spark, spark_builder

CATALOG = "lake"
ICEBERG_SET_PREFIX = "iceberg-spark-"  # + Spark's major.minor: a jar set of jars/pom.xml
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
CALL_TIMEOUT_S = 600
_session: Any = None  # the child's SparkSession (set by _start_session in the child only)


def spark_minor_and_scala() -> tuple[str, str]:
    """(Spark's `major.minor`, its Scala binary version) of the installed PySpark, from its jars."""
    import pyspark

    [core] = (Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar")
    found = re.fullmatch(r"spark-core_(\d+\.\d+)-(\d+\.\d+)\.\d+.*\.jar", core.name)
    if found is None:
        raise RuntimeError(f"unexpected Spark core jar name {core.name}")
    return found.group(2), found.group(1)


def iceberg_jar_set(spark_minor: str) -> str | None:
    """The jar set with Iceberg's runtime for a Spark `major.minor` (jars/pom.xml), None when the pom has none."""
    name = f"{ICEBERG_SET_PREFIX}{spark_minor}"
    return name if name in jars.SETS else None


def require_iceberg_classpath() -> str:
    """The classpath of Iceberg's Spark runtime for this PySpark, or skip (see the module's docstring)."""
    require_spark()
    spark_minor, scala = spark_minor_and_scala()
    jar_set = iceberg_jar_set(spark_minor)
    if jar_set is None:
        pinned = ", ".join(name for name in jars.SETS if name.startswith(ICEBERG_SET_PREFIX))
        pytest.skip(
            f"Apache Iceberg publishes no Spark runtime for Spark {spark_minor} (no release of "
            f"org.apache.iceberg:iceberg-spark-runtime-{spark_minor}_{scala}); jars/pom.xml pins {pinned} "
            "(jars/README.md: why none of them runs here)"
        )
    try:
        return jars.classpath(jar_set)
    except jars.JarsUnavailable as error:
        skip_or_fail(f"Apache Iceberg's Spark runtime is unavailable: {error}")


def _start_session(classpath: str, warehouse: str, events_path: str) -> None:
    """In the child: the Iceberg session, with the emitter attached (events to `events_path`)."""
    import os
    import sys

    global _session  # the child's one session, made once by the pool's initializer
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import emitter

    builder = (
        spark_builder("iceberg", Path(warehouse) / "spark-warehouse")
        .config("spark.jars", classpath.replace(":", ","))
        .config("spark.sql.extensions", ICEBERG_EXTENSIONS)
        .config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        .config(f"spark.sql.catalog.{CATALOG}.warehouse", str(Path(warehouse) / CATALOG))
    )
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    transport = {"type": "file", "log_file_path": events_path, "append": True}
    if emitter.attach(_session, {"transport": transport}) is None:
        raise RuntimeError("the emitter did not attach to the Iceberg session")


class ChildError(RuntimeError):
    """What a call raised in the child (Spark's exceptions do not pickle), with its traceback."""


def _call(function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        return function(_session, *args)
    except Exception as error:
        raise ChildError(traceback.format_exc()) from error


def _sql(spark: Any, query: str) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in spark.sql(query).collect()]


def _settle(spark: Any) -> None:
    import emitter

    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(30_000)
    if not emitter.settle():
        raise RuntimeError("the emitter's pipeline did not settle")


def _stop(spark: Any) -> None:
    spark.stop()


class IcebergSession:
    """The child process's Iceberg session, driven from the test."""

    def __init__(self, classpath: str, work: Path) -> None:
        self.warehouse = work / CATALOG
        self.events_path = work / "events.jsonl"
        self._pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_session,
            initargs=(classpath, str(work), str(self.events_path)),
        )

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(spark, *args)` in the child; its result (plain data)."""
        return self._pool.submit(_call, function, args).result(timeout=CALL_TIMEOUT_S)

    def sql(self, query: str) -> list[dict[str, Any]]:
        """The rows of a query, as dicts."""
        return list(self.call(_sql, query))

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        """What Iceberg reports of a table's snapshots, oldest first."""
        return self.sql(f"SELECT snapshot_id, committed_at, operation FROM {table}.snapshots ORDER BY committed_at")

    def location(self, table: str) -> Path:
        """Where the Hadoop catalog keeps a table (`lake.db.t` -> WAREHOUSE/db/t)."""
        return self.warehouse.joinpath(*table.split(".")[1:])

    def events(self) -> list[dict[str, Any]]:
        """Every event the emitter has emitted so far (the child's Spark listeners drained first)."""
        self.call(_settle)
        return read_events(self.events_path)

    def close(self) -> None:
        try:
            self.call(_stop)
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergSession]:
    """A Spark session with Iceberg (catalog `lake`, a Hadoop catalog in a temporary warehouse) and the
    emitter attached, in a child process; skipped where Iceberg has no runtime for this Spark."""
    classpath = require_iceberg_classpath()
    session = IcebergSession(classpath, tmp_path_factory.mktemp("iceberg"))
    try:
        session.sql("SELECT 1")  # starts the session: a failure here is the fixture's, not a test's
        yield session
    finally:
        session.close()


def completed_writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The COMPLETE events of runs that wrote something, in the order they were emitted."""
    return [event for event in events if event["eventType"] == "COMPLETE" and event["outputs"]]


def as_json(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)
