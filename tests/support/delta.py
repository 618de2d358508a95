"""A real Spark session with Delta Lake for the live lakehouse tests (`tests/lakehouse/`).

The Delta session lives in a child process of its own (`tests.support.lakehouse.ChildSession`), one
per test module (`delta` fixture). It has the Delta jars the project pins for this PySpark's Spark
version (the jar set `delta-spark-<major.minor>`, jars/pom.xml; no Python `delta-spark` package),
Delta's SQL extensions, `DeltaCatalog` as the session catalog (its warehouse a temporary directory)
and the emitter attached (`DeltaSession.events`, `DeltaSession.call`).

A Spark version Delta publishes no release for skips the tests, whatever LINEAGE_REQUIRE_ALL says
(nothing can be installed to run them); jars Maven cannot fetch are a missing dependency: skipped,
or failed under LINEAGE_REQUIRE_ALL=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lakehouse import ChildSession, format_classpath, format_jar_set, started

DELTA_SET_PREFIX = "delta-spark-"  # + Spark's major.minor: a jar set of jars/pom.xml
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def delta_jar_set(spark_minor: str) -> str | None:
    return format_jar_set(DELTA_SET_PREFIX, spark_minor)


def require_delta_classpath() -> str:
    """The classpath of Delta for this PySpark, or skip (see the module's docstring)."""
    return format_classpath(
        DELTA_SET_PREFIX,
        lambda spark_minor, scala: (
            f"Delta Lake publishes no release for Spark {spark_minor} (no io.delta:delta-spark_{scala} built for Spark {spark_minor})"
        ),
        "Delta Lake's jars are",
    )


class DeltaSession(ChildSession):
    """The child process's Delta session, driven from the test."""

    def __init__(self, classpath: str, work: Path) -> None:
        super().__init__("delta", classpath, DELTA_CONF, work)
        self.warehouse = work / "spark-warehouse"

    def history(self, table: str) -> list[dict[str, Any]]:
        """What Delta reports of a table's versions (a name, or `delta.`/path/``), oldest first."""
        return sorted(self.sql(f"DESCRIBE HISTORY {table}"), key=lambda commit: int(commit["version"]))


@pytest.fixture(scope="module")
def delta(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeltaSession]:
    """A Spark session with Delta (DeltaCatalog as the session catalog, a temporary warehouse) and the
    emitter attached, in a child process; skipped where Delta has no release for this Spark."""
    with started(DeltaSession(require_delta_classpath(), tmp_path_factory.mktemp("delta"))) as session:
        yield session
