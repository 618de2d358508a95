"""Delta Lake tables on real Spark with the emitter attached (`delta` fixture, tests/support/delta.py):
each write's run names its Delta table by location, and its `snapshot` facets carry the versions Delta
itself reports (`DESCRIBE HISTORY`): for an output the version the write committed, for an input the
version the scan read (a time-travel read's pinned one; the version before the write when the table
read is the table written). Path tables (`format("delta").save`) and catalog tables (DeltaCatalog as
the session catalog). Functions taking `spark` first run in the fixture's child process
(`DeltaSession.call`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.delta import DeltaSession
from tests.support.lakehouse import completed_writes, snapshot_fields
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

Edge = tuple[str, str, str, str]  # (input dataset name, input field, type, subtype)


# in the child ----------------------------------------------------------------------------
def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _write_path_table(spark: Any, path: str) -> None:
    """Version 0: ids 0..3 partitioned by `part` (id % 2); version 1: two more rows in part 1;
    version 2: part 0 rewritten (replaceWhere)."""
    rows = spark.range(4).selectExpr("id", "CAST(id % 2 AS string) AS part")
    rows.write.format("delta").partitionBy("part").save(path)
    spark.range(2).selectExpr("id + 10 AS id", "'1' AS part").write.format("delta").mode("append").save(path)
    replaced = spark.range(1).selectExpr("id + 20 AS id", "'0' AS part")
    replaced.write.format("delta").mode("overwrite").option("replaceWhere", "part = '0'").save(path)


def _copy_version(spark: Any, source: str, version: int, target: str) -> None:
    """Version `version` of the path table `source`, its part 1 only, to a new path table."""
    frame = spark.read.format("delta").option("versionAsOf", version).load(source).where("part = '1'")
    frame.selectExpr("id * 2 AS doubled", "part").write.format("delta").partitionBy("part").save(target)


# in the test -----------------------------------------------------------------------------
def _path_name(path: str) -> str:
    """The dataset name the emitter gives a Delta path table: its location (namespace `file`)."""
    return path


def _table_name(lake: DeltaSession, table: str) -> str:
    """The dataset name of a managed catalog table: its location in the warehouse."""
    return str(lake.warehouse / table)


def _writes(lake: DeltaSession, name: str) -> list[dict[str, Any]]:
    """The COMPLETE events of the runs that wrote dataset `name`, in order, each valid by the spec."""
    runs = [run for run in completed_writes(lake.events()) if [o["name"] for o in run["outputs"]] == [name]]
    for run in runs:
        assert_valid_event(run)
        assert [o["namespace"] for o in run["outputs"]] == ["file"]
    return runs


def _input(run: dict[str, Any], name: str) -> dict[str, Any]:
    [dataset] = [d for d in run["inputs"] if d["name"] == name]
    assert dataset["namespace"] == "file"
    return dataset


def _versions(lake: DeltaSession, table: str) -> list[dict[str, Any]]:
    """Delta's history of `table` (a name or delta.`path`), oldest first: version (as the facet
    writes it), operation and its parameters."""
    return [
        {"version": str(commit["version"]), "operation": commit["operation"], "parameters": commit["operationParameters"]}
        for commit in lake.history(table)
    ]


def _field_edges(dataset: dict[str, Any]) -> dict[str, set[Edge]]:
    fields = dataset["facets"]["columnLineage"]["fields"]
    return {
        column: {
            (source["name"], source["field"], transformation["type"], transformation["subtype"])
            for source in field["inputFields"]
            for transformation in source["transformations"]
        }
        for column, field in fields.items()
    }


@pytest.fixture(scope="module")
def path_table(delta: DeltaSession) -> str:
    """A path table at version 2 (`_write_path_table`), written once for the module's tests."""
    path = str(delta.work / "path_table")
    delta.call(_write_path_table, path)
    return path


# tests -----------------------------------------------------------------------------------
def test_path_table_writes_report_the_versions_they_committed_and_the_partitions_written(
    delta: DeltaSession, path_table: str
) -> None:
    path = path_table
    history = _versions(delta, f"delta.`{path}`")
    assert [commit["operation"] for commit in history] == ["WRITE", "WRITE", "WRITE"]
    runs = _writes(delta, _path_name(path))
    assert [snapshot_fields(run["outputs"][0]) for run in runs] == [
        {"snapshotId": history[0]["version"], "kind": "delta", "partitions": [{"part": "0"}, {"part": "1"}]},
        {"snapshotId": history[1]["version"], "kind": "delta", "partitions": [{"part": "1"}]},
        {"snapshotId": history[2]["version"], "kind": "delta", "partitions": [{"part": "0"}]},
    ]
    assert [run["inputs"] for run in runs] == [[], [], []]  # from spark.range: no dataset read


@pytest.mark.parametrize("version", [0, 1])
def test_a_path_read_pinned_with_version_as_of_reports_that_version(delta: DeltaSession, path_table: str, version: int) -> None:
    source, target = path_table, str(delta.work / f"pinned_target_{version}")
    delta.call(_copy_version, source, version, target)

    [run] = _writes(delta, _path_name(target))
    [target_commit] = _versions(delta, f"delta.`{target}`")
    source_commits = _versions(delta, f"delta.`{source}`")
    assert len(source_commits) == 3  # the read is pinned to an older version than the latest
    assert snapshot_fields(run["outputs"][0]) == {
        "snapshotId": target_commit["version"],
        "kind": "delta",
        "partitions": [{"part": "1"}],
    }
    assert snapshot_fields(_input(run, _path_name(source))) == {
        "snapshotId": source_commits[version]["version"],
        "kind": "delta",
        "partitions": [{"part": "1"}],
    }
    assert _field_edges(run["outputs"][0]) == {
        "doubled": {(_path_name(source), "id", "DIRECT", "TRANSFORMATION")},
        "part": {(_path_name(source), "part", "DIRECT", "IDENTITY")},
    }


def test_catalog_tables_ctas_insert_select_of_itself_and_insert_overwrite_of_a_partition(delta: DeltaSession) -> None:
    source, target = "ctas_source", "ctas_target"
    delta.call(
        _sql,
        f"CREATE TABLE {source} USING delta PARTITIONED BY (region) AS "
        "SELECT id, IF(id % 2 = 0, 'eu', 'us') AS region FROM range(6)",
        f"CREATE TABLE {target} USING delta PARTITIONED BY (region) AS SELECT id * 10 AS id, upper(region) AS region "
        f"FROM {source} WHERE region = 'eu'",
        # the table read is the table written: its input is the version before the write
        f"INSERT INTO {source} SELECT id + 100, region FROM {source} WHERE region = 'us'",
        f"INSERT OVERWRITE {target} PARTITION (region = 'US') SELECT id FROM {source} WHERE region = 'us'",
    )
    source_name, target_name = _table_name(delta, source), _table_name(delta, target)
    source_commits, target_commits = _versions(delta, source), _versions(delta, target)
    assert [commit["operation"] for commit in source_commits] == ["CREATE TABLE AS SELECT", "WRITE"]
    assert [commit["operation"] for commit in target_commits] == ["CREATE TABLE AS SELECT", "WRITE"]

    [ctas, overwrite] = _writes(delta, target_name)
    assert str(ctas["job"]["name"]).split(".")[1] == "create_table_as_select"
    assert snapshot_fields(ctas["outputs"][0]) == {
        "snapshotId": target_commits[0]["version"],
        "kind": "delta",
        "partitions": [{"region": "EU"}],
    }
    assert snapshot_fields(_input(ctas, source_name)) == {
        "snapshotId": source_commits[0]["version"],
        "kind": "delta",
        "partitions": [{"region": "eu"}],
    }
    assert _field_edges(ctas["outputs"][0]) == {
        "id": {(source_name, "id", "DIRECT", "TRANSFORMATION")},
        "region": {(source_name, "region", "DIRECT", "TRANSFORMATION")},
    }

    [_, insert] = _writes(delta, source_name)  # the first is the source's own CTAS, from range()
    assert snapshot_fields(insert["outputs"][0]) == {
        "snapshotId": source_commits[1]["version"],
        "kind": "delta",
        "partitions": [{"region": "us"}],
    }
    assert snapshot_fields(_input(insert, source_name)) == {
        "snapshotId": source_commits[0]["version"],
        "kind": "delta",
        "partitions": [{"region": "us"}],
    }
    assert _field_edges(insert["outputs"][0]) == {
        "id": {(source_name, "id", "DIRECT", "TRANSFORMATION")},
        "region": {(source_name, "region", "DIRECT", "IDENTITY")},
    }

    assert target_commits[1]["parameters"]["mode"] == "Overwrite"
    assert snapshot_fields(overwrite["outputs"][0]) == {
        "snapshotId": target_commits[1]["version"],
        "kind": "delta",
        "partitions": [{"region": "US"}],
    }
    assert snapshot_fields(_input(overwrite, source_name)) == {
        "snapshotId": source_commits[1]["version"],
        "kind": "delta",
        "partitions": [{"region": "us"}],
    }
    assert _field_edges(overwrite["outputs"][0]) == {"id": {(source_name, "id", "DIRECT", "IDENTITY")}}


@pytest.mark.parametrize("clause", ["VERSION AS OF 0", "TIMESTAMP AS OF '{committed_at}'"])
def test_a_catalog_table_read_with_time_travel_reports_the_version_it_read(delta: DeltaSession, clause: str) -> None:
    suffix = "version" if clause.startswith("VERSION") else "timestamp"
    source, target = f"travel_source_{suffix}", f"travel_target_{suffix}"
    delta.call(
        _sql,
        f"CREATE TABLE {source} USING delta AS SELECT id, CAST(id AS string) AS label FROM range(3)",
        f"INSERT INTO {source} SELECT id + 10, 'later' FROM range(2)",
    )
    first, latest = _versions(delta, source)
    committed_at = delta.history(source)[0]["timestamp"]
    pinned = clause.format(committed_at=committed_at)
    delta.call(_sql, f"CREATE TABLE {target} USING delta AS SELECT id, label FROM {source} {pinned}")

    source_name = _table_name(delta, source)
    [run] = _writes(delta, _table_name(delta, target))
    assert latest["version"] != first["version"]
    [target_commit] = _versions(delta, target)
    assert snapshot_fields(run["outputs"][0]) == {"snapshotId": target_commit["version"], "kind": "delta", "partitions": []}
    assert snapshot_fields(_input(run, source_name))["snapshotId"] == first["version"]
    assert snapshot_fields(_input(run, source_name))["kind"] == "delta"
    assert _field_edges(run["outputs"][0]) == {
        "id": {(source_name, "id", "DIRECT", "IDENTITY")},
        "label": {(source_name, "label", "DIRECT", "IDENTITY")},
    }
