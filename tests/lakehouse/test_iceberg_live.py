"""Apache Iceberg tables on real Spark with the emitter attached (`iceberg` fixture,
tests/support/iceberg.py): each write command's run names its Iceberg tables by location, and its
`snapshot` facets carry the snapshot ids Iceberg itself reports (`<table>.snapshots`) and the
partitions Iceberg's metadata tables list (`all_entries`, `files`), hidden partitioning included.

Every source table is partitioned by `days(ts)`, `bucket(4, id)` and `region`. Functions taking
`spark` first run in the fixture's child process (`IcebergSession.call`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.consumer_api import api_after_ingesting
from tests.support.iceberg import (
    CATALOG,
    JDBC_CATALOG,
    IcebergSession,
    changed_partitions,
    partition_text,
    require_jdbc_catalog,
    snapshot_list,
)
from tests.support.lakehouse import Edge, completed_writes, dataset_edges, field_edges, snapshot_fields, sorted_partitions
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

PARTITIONED_SOURCE = "(id bigint, ts timestamp, region string) USING iceberg PARTITIONED BY (days(ts), bucket(4, id), region)"
SOURCE_ROWS = (
    "(1, timestamp'2024-01-01 10:00:00', 'eu'), (2, timestamp'2024-01-02 10:00:00', 'us'), "
    "(3, timestamp'2024-01-02 23:00:00', 'eu'), (7, timestamp'2024-01-03 08:00:00', NULL)"
)


# in the child ----------------------------------------------------------------------------
def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _with_overwrite_mode(spark: Any, mode: str, statement: str) -> None:
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", mode)
    try:
        spark.sql(statement)
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")


def _writer_v2(spark: Any, source: str, target: str) -> None:
    from pyspark.sql.functions import col, upper

    eu = spark.table(source).where("region = 'eu'")
    eu.select("id", "ts", upper("region").alias("region")).writeTo(target).using("iceberg").partitionedBy(
        col("region")
    ).createOrReplace()
    spark.table(source).where("region = 'us'").writeTo(target).append()
    eu.select("id", "ts", "region").writeTo(target).overwritePartitions()


def _read_with_snapshot_option(spark: Any, source: str, snapshot_id: int, target: str, through_load: bool) -> None:
    reader = spark.read.option("snapshot-id", snapshot_id)
    frame = reader.format("iceberg").load(source) if through_load else reader.table(source)
    frame.writeTo(target).create()


HOLD_LISTENER_BUS = """
public class LineageTestListenerBusHold extends org.apache.spark.scheduler.SparkListener {
  final java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);
  public void onOtherEvent(org.apache.spark.scheduler.SparkListenerEvent event) {
    try { released.await(120L, java.util.concurrent.TimeUnit.SECONDS); } catch (InterruptedException stop) { }
  }
  public void release() { released.countDown(); }
}
"""


def _while_listeners_wait(spark: Any, *statements: str) -> None:
    """Run `statements` while Spark's listener bus is held at the first SQL event, so every
    listener (the emitter's included) hears of the first action only after the last one ran."""
    jvm = spark.sparkContext._gateway.jvm
    compiler = jvm.org.codehaus.janino.SimpleCompiler()
    compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    compiler.cook(HOLD_LISTENER_BUS)
    hold = compiler.getClassLoader().loadClass("LineageTestListenerBusHold").newInstance()
    context = spark.sparkContext._jsc.sc()
    context.addSparkListener(hold)
    try:
        _sql(spark, *statements)
    finally:
        hold.release()
        context.removeSparkListener(hold)


# in the test -----------------------------------------------------------------------------
def _create_source(lake: IcebergSession, table: str) -> None:
    lake.call(_sql, f"CREATE TABLE {table} {PARTITIONED_SOURCE}", f"INSERT INTO {table} VALUES {SOURCE_ROWS}")


def _name(lake: IcebergSession, table: str) -> str:
    """The dataset name the emitter gives an Iceberg table: its location (namespace `file`)."""
    return str(lake.location(table))


def _writes(lake: IcebergSession, table: str) -> list[dict[str, Any]]:
    """The COMPLETE events of the runs that wrote `table`, in order, each valid by the spec."""
    runs = [run for run in completed_writes(lake.events()) if [o["name"] for o in run["outputs"]] == [_name(lake, table)]]
    for run in runs:
        assert_valid_event(run)
        assert [o["namespace"] for o in run["outputs"]] == ["file"]
    return runs


def _input(lake: IcebergSession, run: dict[str, Any], table: str) -> dict[str, Any]:
    [dataset] = [d for d in run["inputs"] if d["name"] == _name(lake, table)]
    assert dataset["namespace"] == "file"
    return dataset


def _file_partitions(lake: IcebergSession, table: str, snapshot_id: str, where: str = "TRUE") -> list[dict[str, str]]:
    """The partitions of the data files of snapshot `snapshot_id` of `table` that match `where`."""
    rows = lake.sql(f"SELECT DISTINCT partition FROM {table}.files VERSION AS OF {snapshot_id} WHERE {where}")
    return sorted_partitions([partition_text(row["partition"]) for row in rows])


def _filter(name: str, column: str, description: str) -> tuple[str, str, str, str, str]:
    """A FILTER edge; the filters below select whole partitions: Iceberg evaluates them, Spark drops
    them from its plan, and they are described as Iceberg prints them."""
    return (name, column, "INDIRECT", "FILTER", description)


def _identity(name: str, *columns: str) -> dict[str, set[Edge]]:
    return {column: {(name, column, "DIRECT", "IDENTITY")} for column in columns}


def _partitions_upstream(
    store: Any, events: list[dict[str, Any]], table: str, partition: dict[str, str]
) -> dict[str, list[dict[str, str]]]:
    """Through the consumer: the partitions, per table, that `partition` of `table` derives from
    directly (one step: a partition's lineage spans every snapshot of it, docs/api.md)."""
    name = "/".join(f"{column}={value}" for column, value in partition.items())
    with api_after_ingesting(store, events) as client:
        answer = client.get(
            "/api/v1/lineage-store/partitions",
            params={"table": f"file:{table}", "partition": name, "direction": "upstream", "depth": 1},
        )
    assert answer.status_code == 200, answer.text
    found: dict[str, list[dict[str, str]]] = {}
    for upstream in answer.json()["partitions"]:
        found.setdefault(upstream["name"], []).append(dict(part.split("=", 1) for part in upstream["partition"].split("/")))
    return {table: sorted_partitions(partitions) for table, partitions in found.items()}


def _job_command(run: dict[str, Any]) -> str:
    return str(run["job"]["name"]).split(".")[1]


@pytest.fixture(params=[CATALOG, JDBC_CATALOG])
def catalog(request: pytest.FixtureRequest, iceberg: IcebergSession) -> str:
    """The Hadoop catalog `lake`, and the JDBC catalog `pg` (PostgreSQL) with its namespace `db`."""
    if request.param == JDBC_CATALOG:
        require_jdbc_catalog(iceberg)
        iceberg.call(_sql, f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.db")
    return str(request.param)


# tests -----------------------------------------------------------------------------------
def test_ctas_is_one_run_with_the_snapshot_it_committed(iceberg: IcebergSession, catalog: str) -> None:
    source, target = f"{catalog}.db.ctas_source", f"{catalog}.db.ctas_target"
    _create_source(iceberg, source)
    iceberg.call(
        _sql,
        f"CREATE TABLE {target} USING iceberg PARTITIONED BY (region) AS "
        f"SELECT id, upper(region) AS region, ts FROM {source} WHERE region IS NOT NULL",
    )

    [run] = _writes(iceberg, target)  # the CTAS and its nested append are one run
    assert _job_command(run) == "create_table_as_select"
    [source_snapshot] = snapshot_list(iceberg, source)
    [target_snapshot] = snapshot_list(iceberg, target)
    [output] = run["outputs"]
    assert snapshot_fields(output) == {
        "snapshotId": target_snapshot["id"],
        "kind": "iceberg",
        "partitions": changed_partitions(iceberg, target, target_snapshot["id"]),
    }
    assert snapshot_fields(output)["partitions"] == [{"region": "EU"}, {"region": "US"}]
    assert [d["name"] for d in run["inputs"]] == [_name(iceberg, source)]
    assert snapshot_fields(_input(iceberg, run, source)) == {
        "snapshotId": source_snapshot["id"],
        "kind": "iceberg",
        "partitions": _file_partitions(iceberg, source, source_snapshot["id"], "partition.region IS NOT NULL"),
    }
    source_name = _name(iceberg, source)
    assert field_edges(output) == {
        **_identity(source_name, "id", "ts"),
        "region": {(source_name, "region", "DIRECT", "TRANSFORMATION")},
    }
    assert dataset_edges(output) == {_filter(source_name, "region", "region IS NOT NULL")}

    iceberg.call(_sql, f"CREATE OR REPLACE TABLE {target} USING iceberg AS SELECT id, region FROM {source} WHERE region = 'us'")
    [_, replace] = _writes(iceberg, target)
    assert _job_command(replace) == "replace_table_as_select"
    [_, replaced] = snapshot_list(iceberg, target)
    assert snapshot_fields(replace["outputs"][0]) == {"snapshotId": replaced["id"], "kind": "iceberg", "partitions": []}
    assert snapshot_fields(_input(iceberg, replace, source))["snapshotId"] == source_snapshot["id"]
    assert field_edges(replace["outputs"][0]) == _identity(source_name, "id", "region")
    assert dataset_edges(replace["outputs"][0]) == {_filter(source_name, "region", "region = 'us'")}


def test_insert_into_select_reports_what_it_read_and_what_it_committed(iceberg: IcebergSession, sqlite_store: Any) -> None:
    source, target = "lake.db.insert_source", "lake.db.insert_target"
    _create_source(iceberg, source)
    iceberg.call(
        _sql,
        f"CREATE TABLE {target} (id bigint, region string) USING iceberg PARTITIONED BY (bucket(4, id))",
        f"INSERT INTO {target} SELECT id * 10, region FROM {source} WHERE ts < timestamp'2024-01-02 00:00:00'",
        # the table read is the table written: the input is the snapshot before the write
        f"INSERT INTO {source} SELECT id + 100, ts, region FROM {source} WHERE region = 'eu'",
    )

    [first_source, second_source] = snapshot_list(iceberg, source)
    [into_target] = _writes(iceberg, target)
    assert _job_command(into_target) == "append_data"
    [target_snapshot] = snapshot_list(iceberg, target)
    [output] = into_target["outputs"]
    assert snapshot_fields(output) == {
        "snapshotId": target_snapshot["id"],
        "kind": "iceberg",
        "partitions": changed_partitions(iceberg, target, target_snapshot["id"]),
    }
    days_before = "partition.ts_day < date'2024-01-02'"
    assert snapshot_fields(_input(iceberg, into_target, source)) == {
        "snapshotId": first_source["id"],
        "kind": "iceberg",
        "partitions": _file_partitions(iceberg, source, first_source["id"], days_before),
    }
    assert snapshot_fields(_input(iceberg, into_target, source))["partitions"] == [
        {"id_bucket": "0", "region": "eu", "ts_day": "2024-01-01"}
    ]
    source_name = _name(iceberg, source)
    assert field_edges(output) == {
        "id": {(source_name, "id", "DIRECT", "TRANSFORMATION")},
        **_identity(source_name, "region"),
    }
    assert dataset_edges(output) == {_filter(source_name, "ts", "ts < 1704153600000000")}  # 2024-01-02 in µs
    [written] = snapshot_fields(output)["partitions"]
    assert _partitions_upstream(sqlite_store, iceberg.events(), _name(iceberg, target), written) == {
        source_name: snapshot_fields(_input(iceberg, into_target, source))["partitions"]
    }

    [_, into_source] = _writes(iceberg, source)  # the first is the source's own INSERT ... VALUES
    assert second_source["operation"] == "append"
    assert snapshot_fields(_input(iceberg, into_source, source)) == {
        "snapshotId": first_source["id"],
        "kind": "iceberg",
        "partitions": _file_partitions(iceberg, source, first_source["id"], "partition.region = 'eu'"),
    }
    assert snapshot_fields(into_source["outputs"][0]) == {
        "snapshotId": second_source["id"],
        "kind": "iceberg",
        "partitions": changed_partitions(iceberg, source, second_source["id"]),
    }
    assert field_edges(into_source["outputs"][0]) == {
        "id": {(source_name, "id", "DIRECT", "TRANSFORMATION")},
        **_identity(source_name, "ts", "region"),
    }


@pytest.mark.parametrize(
    ("mode", "statement", "command"),
    [
        ("static", "INSERT OVERWRITE {target} PARTITION (region = 'us') SELECT id, ts FROM {source} WHERE region = 'eu'",
         "overwrite_by_expression"),
        ("dynamic", "INSERT OVERWRITE {target} SELECT id + 1, ts, region FROM {source} WHERE region = 'eu'",
         "overwrite_partitions_dynamic"),
    ],
)  # fmt: skip
def test_insert_overwrite_reports_the_partitions_it_replaced(
    iceberg: IcebergSession, mode: str, statement: str, command: str
) -> None:
    source, target = f"lake.db.overwrite_{mode}_source", f"lake.db.overwrite_{mode}_target"
    _create_source(iceberg, source)
    _create_source(iceberg, target)
    iceberg.call(_with_overwrite_mode, mode, statement.format(source=source, target=target))

    [_, overwrite] = _writes(iceberg, target)
    assert _job_command(overwrite) == command
    [source_snapshot] = snapshot_list(iceberg, source)
    [_, replaced] = snapshot_list(iceberg, target)
    assert replaced["operation"] == "overwrite"
    [output] = overwrite["outputs"]
    changed = changed_partitions(iceberg, target, replaced["id"])
    assert snapshot_fields(output) == {"snapshotId": replaced["id"], "kind": "iceberg", "partitions": changed}
    # static: every 'us' file went, the 'eu' rows came in as 'us'; dynamic: the 'eu' partitions were replaced
    expected_regions = {"us"} if mode == "static" else {"eu"}
    assert {partition["region"] for partition in changed} == expected_regions
    assert snapshot_fields(_input(iceberg, overwrite, source)) == {
        "snapshotId": source_snapshot["id"],
        "kind": "iceberg",
        "partitions": _file_partitions(iceberg, source, source_snapshot["id"], "partition.region = 'eu'"),
    }
    source_name = _name(iceberg, source)
    lineage = field_edges(output)
    assert lineage["ts"] == {(source_name, "ts", "DIRECT", "IDENTITY")}
    assert lineage["id"] == {(source_name, "id", "DIRECT", "IDENTITY" if mode == "static" else "TRANSFORMATION")}
    assert lineage.get("region", set()) == (set() if mode == "static" else {(source_name, "region", "DIRECT", "IDENTITY")})
    assert dataset_edges(output) == {_filter(source_name, "region", "region = 'eu'")}


def test_dataframe_writer_v2_create_or_replace_append_and_overwrite_partitions(iceberg: IcebergSession, catalog: str) -> None:
    source, target = f"{catalog}.db.v2_source", f"{catalog}.db.v2_target"
    _create_source(iceberg, source)
    iceberg.call(_writer_v2, source, target)

    runs = _writes(iceberg, target)
    assert [_job_command(run) for run in runs] == ["replace_table_as_select", "append_data", "overwrite_partitions_dynamic"]
    snapshots = snapshot_list(iceberg, target)
    assert [snapshot["operation"] for snapshot in snapshots] == ["overwrite", "append", "overwrite"]
    [source_snapshot] = snapshot_list(iceberg, source)
    source_name = _name(iceberg, source)
    regions = ["eu", "us", "eu"]
    for run, snapshot, region in zip(runs, snapshots, regions, strict=True):
        [output] = run["outputs"]
        assert snapshot_fields(output) == {
            "snapshotId": snapshot["id"],
            "kind": "iceberg",
            "partitions": changed_partitions(iceberg, target, snapshot["id"]),
        }
        assert snapshot_fields(_input(iceberg, run, source)) == {
            "snapshotId": source_snapshot["id"],
            "kind": "iceberg",
            "partitions": _file_partitions(iceberg, source, source_snapshot["id"], f"partition.region = '{region}'"),
        }
        assert dataset_edges(output) == {_filter(source_name, "region", f"region = '{region}'")}
    assert [snapshot_fields(run["outputs"][0])["partitions"] for run in runs] == [
        [{"region": "EU"}],
        [{"region": "us"}],
        [{"region": "eu"}],
    ]
    created, appended, overwritten = (field_edges(run["outputs"][0]) for run in runs)
    assert created == {**_identity(source_name, "id", "ts"), "region": {(source_name, "region", "DIRECT", "TRANSFORMATION")}}
    assert appended == overwritten == _identity(source_name, "id", "ts", "region")


def test_reads_report_the_snapshot_the_scan_read(iceberg: IcebergSession, catalog: str) -> None:
    source = f"{catalog}.db.travel_source"
    _create_source(iceberg, source)
    iceberg.call(_sql, f"INSERT INTO {source} VALUES (4, timestamp'2024-01-04 10:00:00', 'us')")
    [first, second] = snapshot_list(iceberg, source)
    [first_at] = iceberg.sql(
        f"SELECT CAST(committed_at AS STRING) AS at FROM {source}.snapshots WHERE snapshot_id = {first['id']}"
    )
    iceberg.call(
        _sql,
        f"CREATE TABLE {catalog}.db.travel_current USING iceberg AS SELECT * FROM {source}",
        f"CREATE TABLE {catalog}.db.travel_version USING iceberg AS SELECT * FROM {source} VERSION AS OF {first['id']}",
        f"CREATE TABLE {catalog}.db.travel_timestamp USING iceberg AS SELECT * FROM {source} TIMESTAMP AS OF '{first_at['at']}'",
    )
    iceberg.call(_read_with_snapshot_option, source, int(first["id"]), f"{catalog}.db.travel_option", False)
    iceberg.call(_read_with_snapshot_option, source, int(first["id"]), f"{catalog}.db.travel_load", True)

    read = {
        f"{catalog}.db.travel_current": second,
        f"{catalog}.db.travel_version": first,
        f"{catalog}.db.travel_timestamp": first,
        f"{catalog}.db.travel_option": first,
        f"{catalog}.db.travel_load": first,
    }
    source_name = _name(iceberg, source)
    for target, snapshot in read.items():
        [run] = _writes(iceberg, target)
        assert _job_command(run) == "create_table_as_select", target
        dataset = _input(iceberg, run, source)
        assert snapshot_fields(dataset) == {
            "snapshotId": snapshot["id"],
            "kind": "iceberg",
            "partitions": _file_partitions(iceberg, source, snapshot["id"]),
        }, target
        # the table, not the snapshot selector Iceberg reads `snapshot-id` through
        assert [symlink["name"] for symlink in dataset["facets"]["symlinks"]["identifiers"]] == ["db.travel_source"]
        [output] = run["outputs"]
        [written] = snapshot_list(iceberg, target)
        assert snapshot_fields(output) == {"snapshotId": written["id"], "kind": "iceberg", "partitions": []}
        assert field_edges(output) == _identity(source_name, "id", "ts", "region"), target
        assert dataset_edges(output) == set(), target


def test_a_late_listener_still_reports_what_each_action_read_and_committed(iceberg: IcebergSession) -> None:
    """Spark's listeners hear of an action after it ended, maybe after later actions changed the
    same tables: the ids are those Iceberg reported while the action ran, not the tables' current ones."""
    source, target = "lake.db.late_source", "lake.db.late_target"
    _create_source(iceberg, source)
    iceberg.call(_sql, f"CREATE TABLE {target} {PARTITIONED_SOURCE}")
    iceberg.call(
        _while_listeners_wait,
        f"INSERT INTO {target} SELECT * FROM {source} WHERE region = 'us'",
        f"INSERT INTO {source} VALUES (5, timestamp'2024-01-05 10:00:00', 'us')",
        f"INSERT INTO {target} VALUES (6, timestamp'2024-01-06 10:00:00', 'eu')",
    )

    [source_before, _] = snapshot_list(iceberg, source)
    [copied, inserted] = snapshot_list(iceberg, target)
    [copy, insert] = _writes(iceberg, target)
    read_and_written = (
        snapshot_fields(_input(iceberg, copy, source))["snapshotId"],
        snapshot_fields(copy["outputs"][0])["snapshotId"],
    )
    assert read_and_written == (source_before["id"], copied["id"])  # not the tables' snapshots when the listener ran
    assert snapshot_fields(copy["outputs"][0]) == {
        "snapshotId": copied["id"],
        "kind": "iceberg",
        "partitions": changed_partitions(iceberg, target, copied["id"]),
    }
    assert snapshot_fields(insert["outputs"][0]) == {
        "snapshotId": inserted["id"],
        "kind": "iceberg",
        "partitions": [{"id_bucket": _bucket(iceberg, 6), "region": "eu", "ts_day": "2024-01-06"}],
    }


def _bucket(lake: IcebergSession, value: int) -> str:
    """Iceberg's own bucket(4, value)."""
    [row] = lake.sql(f"SELECT lake.system.bucket(4, {value}L) AS bucket")
    return str(row["bucket"])
