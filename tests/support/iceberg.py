"""A real Spark session with Apache Iceberg for the live lakehouse tests (`tests/lakehouse/`).

The Iceberg session lives in a child process of its own (`tests.support.lakehouse.ChildSession`), one
per test module (`iceberg` fixture). It has the runtime jar the project pins for this PySpark's Spark version
(the jar set `iceberg-spark-<major.minor>`, jars/pom.xml), Iceberg's SQL extensions, a Hadoop catalog
`lake` whose warehouse is a temporary directory, a JDBC catalog `pg` in a database of its own in the
tests' PostgreSQL (when there is one), and the emitter attached (`IcebergSession.events`,
`IcebergSession.call`: see `tests.support.lakehouse`).

A Spark version Iceberg publishes no runtime for skips the tests, whatever LINEAGE_REQUIRE_ALL says
(nothing can be installed to run them); a runtime Maven cannot fetch is a missing dependency:
skipped, or failed under LINEAGE_REQUIRE_ALL=1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.databases import POSTGRES_ADMIN_URL, POSTGRES_URL_ENV
from tests.support.lakehouse import ChildSession, format_classpath, format_jar_set, sorted_partitions, started
from tests.support.require import skip_or_fail

CATALOG = "lake"
JDBC_CATALOG = "pg"
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

    def __init__(self, classpath: str, work: Path, jdbc_catalog: Mapping[str, str] | None = None) -> None:
        super().__init__("iceberg", classpath, {**iceberg_conf(work / CATALOG), **(jdbc_catalog or {})}, work)
        self.warehouse = work / CATALOG
        self.has_jdbc_catalog = bool(jdbc_catalog)

    def snapshots(self, table: str) -> list[dict[str, Any]]:
        """What Iceberg reports of a table's snapshots, oldest first."""
        return self.sql(f"SELECT snapshot_id, committed_at, operation FROM {table}.snapshots ORDER BY committed_at")

    def location(self, table: str) -> Path:
        """Where its catalog keeps a table (`lake.db.t` -> WORK/lake/db/t, `pg.db.t` -> WORK/pg/db/t)."""
        catalog, *parts = table.split(".")
        return (self.work / catalog).joinpath(*parts)


def snapshot_list(lake: IcebergSession, table: str) -> list[dict[str, Any]]:
    """Iceberg's snapshots of `table`, oldest first: id (as the facet writes it) and operation."""
    return [{"id": str(row["snapshot_id"]), "operation": row["operation"]} for row in lake.snapshots(table)]


def partition_text(values: dict[str, Any]) -> dict[str, str]:
    """A partition as the facet shows it: values as text; a null value left out (openlineage-python
    drops null values when it serializes an event)."""
    return {key: str(value) for key, value in values.items() if value is not None}


def changed_partitions(lake: IcebergSession, table: str, snapshot_id: str) -> list[dict[str, str]]:
    """The partitions Iceberg lists files added or deleted in (data files, and the delete files a
    merge-on-read command writes), by snapshot `snapshot_id`."""
    rows = lake.sql(
        f"SELECT DISTINCT data_file.partition AS partition FROM {table}.all_entries "
        f"WHERE snapshot_id = {snapshot_id} AND status IN (1, 2)"
    )
    return sorted_partitions([partition_text(row["partition"]) for row in rows])


def iceberg_conf(warehouse: Path) -> dict[str, str]:
    """Iceberg's SQL extensions and the Hadoop catalog `lake` in `warehouse`."""
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{CATALOG}.warehouse": str(warehouse),
    }


def jdbc_catalog_conf(jdbc_url: str, user: str | None, password: str | None, warehouse: Path) -> dict[str, str]:
    """The JDBC catalog `pg`: its tables' metadata pointers in PostgreSQL, their files in `warehouse`."""
    conf = {
        f"spark.sql.catalog.{JDBC_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{JDBC_CATALOG}.type": "jdbc",
        f"spark.sql.catalog.{JDBC_CATALOG}.uri": jdbc_url,
        f"spark.sql.catalog.{JDBC_CATALOG}.warehouse": str(warehouse),
    }
    if user:
        conf[f"spark.sql.catalog.{JDBC_CATALOG}.jdbc.user"] = user
    if password:
        conf[f"spark.sql.catalog.{JDBC_CATALOG}.jdbc.password"] = password
    return conf


@contextmanager
def catalog_database() -> Iterator[dict[str, str] | None]:
    """A database of its own in the tests' PostgreSQL for the JDBC catalog, dropped afterwards: the
    (url, user, password) of its JDBC connection; None when no PostgreSQL is set or reachable."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    if not POSTGRES_ADMIN_URL:
        yield None
        return
    admin_url = make_url(POSTGRES_ADMIN_URL)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"iceberg_catalog_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError:
        admin.dispose()
        yield None
        return
    try:
        yield {
            "jdbc_url": f"jdbc:postgresql://{admin_url.host}:{admin_url.port or 5432}/{name}",
            "user": admin_url.username or "",
            "password": admin_url.password or "",
        }
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def require_jdbc_catalog(lake: IcebergSession) -> str:
    """The JDBC catalog's name, or skip (fail under LINEAGE_REQUIRE_ALL=1) without PostgreSQL."""
    if not lake.has_jdbc_catalog:
        skip_or_fail(f"no PostgreSQL for Iceberg's JDBC catalog: ${POSTGRES_URL_ENV} is not set or unreachable")
    return JDBC_CATALOG


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergSession]:
    """A Spark session with Iceberg (catalog `lake`, a Hadoop catalog in a temporary warehouse, and
    with PostgreSQL the JDBC catalog `pg` in a database of its own) and the emitter attached, in a
    child process; skipped where Iceberg has no runtime for this Spark."""
    classpath = require_iceberg_classpath()
    with catalog_database() as database:
        work = tmp_path_factory.mktemp("iceberg")
        jdbc = jdbc_catalog_conf(warehouse=work / JDBC_CATALOG, **database) if database else {}
        with started(IcebergSession(classpath, work, jdbc)) as session:
            yield session
