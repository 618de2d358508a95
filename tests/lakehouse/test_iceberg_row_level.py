"""Row-level commands on Apache Iceberg tables (`MERGE INTO`, `UPDATE`, `DELETE`), on real Spark with
the emitter attached (`iceberg` fixture, tests/support/iceberg.py), copy-on-write (Spark's
`ReplaceData`) and merge-on-read (`WriteDelta`): one run per command, whose target is both its input
(the snapshot the command read, as `<table>.snapshots` lists it) and its output (the snapshot it
committed, with the partitions it changed data or delete files in), and column lineage exact per
clause, the same in both modes, checked against edges written by hand.

Functions taking `spark` first run in the fixture's child process (`IcebergSession.call`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.iceberg import IcebergSession, changed_partitions, snapshot_list
from tests.support.lakehouse import (
    DELETE_STATEMENT,
    MERGE_STATEMENT,
    MERGED_ROWS,
    PARTITION_DELETE_STATEMENT,
    ROW_LEVEL_SOURCE_ROWS,
    ROW_LEVEL_TARGET_ROWS,
    UPDATE_STATEMENT,
    completed_writes,
    dataset_edges,
    delete_lineage,
    field_descriptions,
    merge_lineage,
    partition_delete_lineage,
    snapshot_fields,
    update_lineage,
)
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

MODES = {
    "copy-on-write": ("replace_data", ""),
    "merge-on-read": (
        "write_delta",
        " TBLPROPERTIES ('format-version' = '2', 'write.merge.mode' = 'merge-on-read', "
        "'write.update.mode' = 'merge-on-read', 'write.delete.mode' = 'merge-on-read')",
    ),
}


def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _tables(lake: IcebergSession, name: str, mode: str) -> tuple[str, str]:
    """A target `(id, v, other)` partitioned by `other` in `mode`, and an unpartitioned source."""
    target, source = f"lake.db.{name}_target", f"lake.db.{name}_source"
    lake.call(
        _sql,
        f"CREATE TABLE {target} (id bigint, v int, other string) USING iceberg PARTITIONED BY (other){MODES[mode][1]}",
        f"INSERT INTO {target} VALUES {ROW_LEVEL_TARGET_ROWS}",
        f"CREATE TABLE {source} (id bigint, v int, op string) USING iceberg",
        f"INSERT INTO {source} VALUES {ROW_LEVEL_SOURCE_ROWS}",
    )
    return target, source


def _name(lake: IcebergSession, table: str) -> str:
    return str(lake.location(table))


def _command_run(lake: IcebergSession, table: str, command: str) -> dict[str, Any]:
    """The one run of the row-level command (`command`: its job name part) that wrote `table`,
    valid by the spec: START and COMPLETE of one run id, no other run of that job."""
    events = lake.events()
    runs = [run for run in completed_writes(events) if [o["name"] for o in run["outputs"]] == [_name(lake, table)]]
    [run] = [run for run in runs if str(run["job"]["name"]).split(".")[1] == command]
    assert_valid_event(run)
    same_job = [event for event in events if event["job"]["name"] == run["job"]["name"]]
    assert [(event["eventType"], event["run"]["runId"]) for event in same_job] == [
        ("START", run["run"]["runId"]),
        ("COMPLETE", run["run"]["runId"]),
    ]
    return run


def _read_and_committed(lake: IcebergSession, run: dict[str, Any], table: str) -> None:
    """The target is the run's input at the snapshot before the command and its output at the one
    the command committed (the table's last two snapshots), with the partitions it changed."""
    *_, before, after = snapshot_list(lake, table)
    [target_input] = [d for d in run["inputs"] if d["name"] == _name(lake, table)]
    assert snapshot_fields(target_input)["snapshotId"] == before["id"]
    assert snapshot_fields(target_input)["kind"] == "iceberg"
    [output] = run["outputs"]
    assert snapshot_fields(output) == {
        "snapshotId": after["id"],
        "kind": "iceberg",
        "partitions": changed_partitions(lake, table, after["id"]),
    }


@pytest.mark.parametrize("mode", list(MODES))
def test_merge_is_one_run_reading_and_writing_its_target_with_lineage_per_clause(iceberg: IcebergSession, mode: str) -> None:
    name = mode.replace("-", "_")
    target, source = _tables(iceberg, f"merge_{name}", mode)
    iceberg.call(_sql, MERGE_STATEMENT.format(target=target, source=source))

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    [source_snapshot] = snapshot_list(iceberg, source)
    [source_input] = [d for d in run["inputs"] if d["name"] == _name(iceberg, source)]
    assert snapshot_fields(source_input)["snapshotId"] == source_snapshot["id"]
    assert sorted(d["name"] for d in run["inputs"]) == sorted([_name(iceberg, target), _name(iceberg, source)])
    rows = iceberg.sql(f"SELECT id, v, other FROM {target} ORDER BY id")
    assert [tuple(row.values()) for row in rows] == MERGED_ROWS
    changed = snapshot_fields(run["outputs"][0])["partitions"]
    assert {"other": "c"} not in changed  # partition c was not touched
    assert {"other": "x"} in changed and {"other": "b"} in changed

    columns, dataset = merge_lineage(_name(iceberg, target), _name(iceberg, source))
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


@pytest.mark.parametrize("mode", list(MODES))
def test_update_is_its_set_value_conditional_on_its_where(iceberg: IcebergSession, mode: str) -> None:
    name = mode.replace("-", "_")
    target, _ = _tables(iceberg, f"update_{name}", mode)
    iceberg.call(_sql, UPDATE_STATEMENT.format(target=target))

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    assert [d["name"] for d in run["inputs"]] == [_name(iceberg, target)]
    columns, dataset = update_lineage(_name(iceberg, target))
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


@pytest.mark.parametrize("mode", list(MODES))
def test_delete_keeps_every_column_and_filters_by_its_where(iceberg: IcebergSession, mode: str) -> None:
    name = mode.replace("-", "_")
    target, _ = _tables(iceberg, f"delete_{name}", mode)
    # rows of partition a stay: Iceberg cannot drop whole files, Spark rewrites (or marks) rows
    iceberg.call(_sql, DELETE_STATEMENT.format(target=target))

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    columns, dataset = delete_lineage(_name(iceberg, target))
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


@pytest.mark.parametrize("mode", list(MODES))
def test_a_delete_of_whole_partitions_runs_on_metadata_alone_as_one_run_too(iceberg: IcebergSession, mode: str) -> None:
    """Iceberg drops the partition's files without reading them (Spark's DeleteFromTableWithFilters:
    no scan, no rewrite): the run reads the target at the commit's parent snapshot."""
    name = mode.replace("-", "_")
    target, _ = _tables(iceberg, f"partition_delete_{name}", mode)
    iceberg.call(_sql, PARTITION_DELETE_STATEMENT.format(target=target))

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    *_, before, after = iceberg.sql(f"SELECT snapshot_id, parent_id, operation FROM {target}.snapshots ORDER BY committed_at")
    assert after["operation"] == "delete" and after["parent_id"] == before["snapshot_id"]  # metadata only: no file written
    assert snapshot_fields(run["outputs"][0])["partitions"] == [{"other": "a"}]
    [target_input] = run["inputs"]
    assert "partitions" not in snapshot_fields(target_input)  # no scan planned any file
    columns, dataset = partition_delete_lineage(_name(iceberg, target))
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset
