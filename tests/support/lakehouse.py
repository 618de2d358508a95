"""A real Spark session with a table format's jars, in a child process, for the live lakehouse tests.

A table format's jars must be on the driver's classpath when its JVM starts (`spark.jars`), and a
pytest process may already run another session's JVM (the shared `spark` fixture of
`tests.support.spark`): so such a session lives in a child process of its own (`ChildSession`), one
per test module. The child's session has the given jars and Spark settings and the emitter attached,
writing its events to a JSON-lines file the test reads (`ChildSession.events`). Test code runs in
the child through `ChildSession.call(function, *args)`: `function(spark, *args)`, a module-level
function (it is pickled by name), returns plain data. `tests.support.iceberg` and
`tests.support.delta` build their fixtures on it.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import jars
from tests.support.require import skip_or_fail
from tests.support.spark import read_events, require_spark, spark_builder

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


def format_jar_set(set_prefix: str, spark_minor: str) -> str | None:
    """A table format's jar set for a Spark `major.minor` (`<set_prefix><major.minor>`, jars/pom.xml), None when the pom has none."""
    name = f"{set_prefix}{spark_minor}"
    return name if name in jars.SETS else None


def format_classpath(set_prefix: str, no_release: Callable[[str, str], str], unavailable: str) -> str:
    """The classpath of a table format's jar set for this PySpark, or skip. A Spark version the
    format publishes no release for (`no_release(spark_minor, scala)` says which is missing) skips
    whatever LINEAGE_REQUIRE_ALL says: nothing can be installed to run the tests. Jars Maven cannot
    fetch are a missing dependency (`unavailable`): skipped, or failed under LINEAGE_REQUIRE_ALL=1."""
    require_spark()
    spark_minor, scala = spark_minor_and_scala()
    jar_set = format_jar_set(set_prefix, spark_minor)
    if jar_set is None:
        pinned = ", ".join(name for name in jars.SETS if name.startswith(set_prefix))
        pytest.skip(f"{no_release(spark_minor, scala)}; jars/pom.xml pins {pinned} (jars/README.md: why no other runs here)")
    try:
        return jars.classpath(jar_set)
    except jars.JarsUnavailable as error:
        skip_or_fail(f"{unavailable} unavailable: {error}")


def _start_session(app_name: str, classpath: str, conf: Mapping[str, str], work: str, events_path: str) -> None:
    """In the child: the session, with the emitter attached (events to `events_path`)."""
    import os
    import sys

    global _session  # the child's one session, made once by the pool's initializer
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import emitter

    builder = spark_builder(app_name, Path(work) / "spark-warehouse").config("spark.jars", classpath.replace(":", ","))
    for key, value in conf.items():
        builder = builder.config(key, value)
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    transport = {"type": "file", "log_file_path": events_path, "append": True}
    if emitter.attach(_session, {"transport": transport}) is None:
        raise RuntimeError(f"the emitter did not attach to the {app_name} session")


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


class ChildSession:
    """A child process's Spark session (jars `classpath`, settings `conf`), driven from the test."""

    def __init__(self, app_name: str, classpath: str, conf: Mapping[str, str], work: Path) -> None:
        self.work = work
        self.events_path = work / "events.jsonl"
        self._pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_session,
            initargs=(app_name, classpath, dict(conf), str(work), str(self.events_path)),
        )

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(spark, *args)` in the child; its result (plain data)."""
        return self._pool.submit(_call, function, args).result(timeout=CALL_TIMEOUT_S)

    def sql(self, query: str) -> list[dict[str, Any]]:
        """The rows of a query, as dicts."""
        return list(self.call(_sql, query))

    def events(self) -> list[dict[str, Any]]:
        """Every event the emitter has emitted so far (the child's Spark listeners drained first)."""
        self.call(_settle)
        return read_events(self.events_path)

    def close(self) -> None:
        try:
            self.call(_stop)
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def completed_writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The COMPLETE events of runs that wrote something, in the order they were emitted."""
    return [event for event in events if event["eventType"] == "COMPLETE" and event["outputs"]]


def sorted_partitions(partitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Partitions in one fixed order (by their JSON), for comparing lists of them."""
    return sorted(partitions, key=lambda partition: json.dumps(partition, sort_keys=True))


def snapshot_fields(dataset: dict[str, Any]) -> dict[str, Any]:
    """A dataset's snapshot facet's fields (its partitions sorted), checked against its version facet."""
    facets = dataset["facets"]
    assert facets["version"]["datasetVersion"] == facets["snapshot"]["snapshotId"]
    snapshot = {key: value for key, value in facets["snapshot"].items() if not key.startswith("_")}
    if "partitions" in snapshot:
        snapshot["partitions"] = sorted_partitions(snapshot["partitions"])
    return snapshot


Edge = tuple[str, str, str, str]  # (input dataset name, input field, type, subtype)


def edges(input_fields: list[dict[str, Any]]) -> set[Edge]:
    """(input dataset name, field, type, subtype) of each transformation of `input_fields`."""
    return {
        (field["name"], field["field"], transformation["type"], transformation["subtype"])
        for field in input_fields
        for transformation in field["transformations"]
    }


def field_edges(dataset: dict[str, Any]) -> dict[str, set[Edge]]:
    """An output's column lineage: per column, its input fields' edges."""
    fields = dataset["facets"]["columnLineage"]["fields"]
    return {column: edges(field["inputFields"]) for column, field in fields.items()}


def field_descriptions(dataset: dict[str, Any]) -> dict[str, set[tuple[str, str, str, str, str]]]:
    """Per column, (input dataset name, field, type, subtype, description) of its edges."""
    fields = dataset["facets"]["columnLineage"]["fields"]
    return {
        column: {
            (item["name"], item["field"], t["type"], t["subtype"], t.get("description", ""))
            for item in field["inputFields"]
            for t in item["transformations"]
        }
        for column, field in fields.items()
    }


def dataset_edges(dataset: dict[str, Any]) -> set[tuple[str, str, str, str, str]]:
    """(input dataset name, field, type, subtype, description) of the dataset-level edges."""
    return {
        (field["name"], field["field"], transformation["type"], transformation["subtype"], transformation.get("description", ""))
        for field in dataset["facets"]["columnLineage"].get("dataset", [])
        for transformation in field["transformations"]
    }


SessionType = TypeVar("SessionType", bound="ChildSession")


@contextmanager
def started(session: SessionType) -> Iterator[SessionType]:
    """`session` started (a failure then is the fixture's, not a test's), and closed after."""
    try:
        session.sql("SELECT 1")
        yield session
    finally:
        session.close()


# Row-level commands (MERGE INTO / UPDATE / DELETE): the statements the formats' live tests run and
# the column lineage expected of them, written by hand once, so Iceberg and Delta answer the same
# (tests/lakehouse/test_iceberg_row_level.py, test_delta_row_level.py; tests/lineage/test_row_level.py
# checks the captured plans with the names "t" and "s"). The target is `t (id, v, other)`
# partitioned by `other`, the source `s (id, v, op)`.
Described = tuple[str, str, str, str, str]  # (dataset name, field, type, subtype, description)
ColumnEdges = dict[str, set[Described]]

ROW_LEVEL_TARGET_ROWS = "(1, 10, 'a'), (2, 20, 'b'), (3, 30, 'a'), (5, 50, 'c')"
ROW_LEVEL_SOURCE_ROWS = "(1, 100, 'u'), (2, 200, 'd'), (3, 300, 'k'), (4, 400, 'i')"
MERGE_STATEMENT = (
    "MERGE INTO {target} t USING {source} s ON t.id = s.id "
    "WHEN MATCHED AND s.op = 'd' THEN DELETE "
    "WHEN MATCHED AND s.op = 'u' THEN UPDATE SET t.v = s.v * 2 "
    "WHEN NOT MATCHED THEN INSERT (id, v, other) VALUES (s.id, s.v, 'x')"
)
# 1 updated (a), 2 deleted (b), 3 matched but neither clause applies (kept, a), 4 inserted (x), 5 untouched (c)
MERGED_ROWS = [(1, 200, "a"), (3, 30, "a"), (4, 400, "x"), (5, 50, "c")]
UPDATE_STATEMENT = "UPDATE {target} SET v = v + 1 WHERE id > 2"
DELETE_STATEMENT = "DELETE FROM {target} WHERE v > 15 AND v < 40"  # rows of partition a stay: no whole file is dropped
PARTITION_DELETE_STATEMENT = "DELETE FROM {target} WHERE other = 'a'"  # whole files: run on metadata alone


def merge_lineage(t: str, s: str) -> tuple[ColumnEdges, set[Described]]:
    """MERGE_STATEMENT's column lineage (per column, and dataset-level), target `t`, source `s`."""
    columns = {
        # matched rows keep t.id, inserted rows take s.id
        "id": {(t, "id", "DIRECT", "IDENTITY", ""), (s, "id", "DIRECT", "IDENTITY", "")},
        # the update's SET value (only where s.op = 'u'), the insert's value, every other row's own v
        "v": {
            (s, "v", "DIRECT", "TRANSFORMATION", "(v * 2)"),
            (s, "op", "INDIRECT", "CONDITIONAL", "(op = 'u')"),
            (s, "v", "DIRECT", "IDENTITY", ""),
            (t, "v", "DIRECT", "IDENTITY", ""),
        },
        # no clause assigns it but the insert's literal 'x'
        "other": {(t, "other", "DIRECT", "IDENTITY", "")},
    }
    dataset = {
        (t, "id", "INDIRECT", "JOIN", "(id = id)"),
        (s, "id", "INDIRECT", "JOIN", "(id = id)"),
        (s, "op", "INDIRECT", "FILTER", "(op = 'd')"),  # the DELETE clause decides which rows remain
    }
    return columns, dataset


def update_lineage(t: str) -> tuple[ColumnEdges, set[Described]]:
    """UPDATE_STATEMENT's: what `INSERT OVERWRITE t SELECT id, IF(id > 2, v + 1, v), other FROM t`
    gives, the IF split into its clause."""
    columns = {
        "id": {(t, "id", "DIRECT", "IDENTITY", "")},
        "v": {
            (t, "v", "DIRECT", "TRANSFORMATION", "(v + 1)"),
            (t, "v", "DIRECT", "IDENTITY", ""),
            (t, "id", "INDIRECT", "CONDITIONAL", "(id > 2)"),
        },
        "other": {(t, "other", "DIRECT", "IDENTITY", "")},
    }
    return columns, {(t, "id", "INDIRECT", "FILTER", "(id > 2)")}


def delete_lineage(t: str) -> tuple[ColumnEdges, set[Described]]:
    """DELETE_STATEMENT's: what `INSERT OVERWRITE t SELECT * FROM t WHERE NOT (...)` gives, the
    filter as the statement wrote it."""
    columns = {column: {(t, column, "DIRECT", "IDENTITY", "")} for column in ("id", "v", "other")}
    return columns, {(t, "v", "INDIRECT", "FILTER", "((v > 15) AND (v < 40))")}


def partition_delete_lineage(t: str) -> tuple[ColumnEdges, set[Described]]:
    """PARTITION_DELETE_STATEMENT's: as DELETE_STATEMENT's, the filter on the partition column."""
    columns = {column: {(t, column, "DIRECT", "IDENTITY", "")} for column in ("id", "v", "other")}
    return columns, {(t, "other", "INDIRECT", "FILTER", "(other = 'a')")}
