"""A real Spark session with Apache Iceberg for the live lakehouse tests (`tests/lakehouse/`).

The Iceberg session lives in a child process of its own (`tests.support.lakehouse.ChildSession`), one
per test module (`iceberg` fixture). It has the runtime jar the project pins for this PySpark's Spark version
(the jar set `iceberg-spark-<major.minor>`, jars/pom.xml), Iceberg's SQL extensions, a Hadoop catalog
`lake` whose warehouse is a temporary directory, and the emitter attached (`IcebergSession.events`,
`IcebergSession.call`: see `tests.support.lakehouse`).

A Spark version Iceberg publishes no runtime for skips the tests, whatever LINEAGE_REQUIRE_ALL says
(nothing can be installed to run them); a runtime Maven cannot fetch is a missing dependency:
skipped, or failed under LINEAGE_REQUIRE_ALL=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lakehouse import ChildSession, format_classpath, format_jar_set, started

CATALOG = "lake"
ICEBERG_SET_PREFIX = "iceberg-spark-"  # + Spark's major.minor: a jar set of jars/pom.xml
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def iceberg_jar_set(spark_minor: str) -> str | None:
    return format_jar_set(ICEBERG_SET_PREFIX, spark_minor)


def require_iceberg_classpath() -> str:
    """The classpath of Iceberg's Spark runtime for this PySpark, or skip (see the module's docstring)."""
    return format_classpath(
        ICEBERG_SET_PREFIX,
        lambda spark_minor, scala: (
            f"Apache Iceberg publishes no Spark runtime for Spark {spark_minor} "
            f"(no release of org.apache.iceberg:iceberg-spark-runtime-{spark_minor}_{scala})"
        ),
        "Apache Iceberg's Spark runtime is",
    )


class IcebergSession(ChildSession):
    """The child process's Iceberg session, driven from the test."""

    def __init__(self, classpath: str, work: Path) -> None:
        super().__init__("iceberg", classpath, iceberg_conf(work / CATALOG), work)
        self.warehouse = work / CATALOG

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        """What Iceberg reports of a table's snapshots, oldest first."""
        return self.sql(f"SELECT snapshot_id, committed_at, operation FROM {table}.snapshots ORDER BY committed_at")

    def location(self, table: str) -> Path:
        """Where the Hadoop catalog keeps a table (`lake.db.t` -> WAREHOUSE/db/t)."""
        return self.warehouse.joinpath(*table.split(".")[1:])


def iceberg_conf(warehouse: Path) -> dict[str, str]:
    """Iceberg's SQL extensions and the Hadoop catalog `lake` in `warehouse`."""
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{CATALOG}.warehouse": str(warehouse),
    }


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergSession]:
    """A Spark session with Iceberg (catalog `lake`, a Hadoop catalog in a temporary warehouse) and the
    emitter attached, in a child process; skipped where Iceberg has no runtime for this Spark."""
    with started(IcebergSession(require_iceberg_classpath(), tmp_path_factory.mktemp("iceberg"))) as session:
        yield session
