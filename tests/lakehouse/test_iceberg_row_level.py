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
from tests.support.lakehouse import completed_writes, dataset_edges, field_descriptions, snapshot_fields
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
TARGET_ROWS = "(1, 10, 'a'), (2, 20, 'b'), (3, 30, 'a'), (5, 50, 'c')"
SOURCE_ROWS = "(1, 100, 'u'), (2, 200, 'd'), (3, 300, 'k'), (4, 400, 'i')"
MERGE = (
    "MERGE INTO {target} t USING {source} s ON t.id = s.id "
    "WHEN MATCHED AND s.op = 'd' THEN DELETE "
    "WHEN MATCHED AND s.op = 'u' THEN UPDATE SET t.v = s.v * 2 "
    "WHEN NOT MATCHED THEN INSERT (id, v, other) VALUES (s.id, s.v, 'x')"
)
Described = tuple[str, str, str, str, str]  # (dataset name, field, type, subtype, description)


def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _tables(lake: IcebergSession, name: str, mode: str) -> tuple[str, str]:
    """A target `(id, v, other)` partitioned by `other` in `mode`, and an unpartitioned source."""
    target, source = f"lake.db.{name}_target", f"lake.db.{name}_source"
    lake.call(
        _sql,
        f"CREATE TABLE {target} (id bigint, v int, other string) USING iceberg PARTITIONED BY (other){MODES[mode][1]}",
        f"INSERT INTO {target} VALUES {TARGET_ROWS}",
        f"CREATE TABLE {source} (id bigint, v int, op string) USING iceberg",
        f"INSERT INTO {source} VALUES {SOURCE_ROWS}",
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
    iceberg.call(_sql, MERGE.format(target=target, source=source))

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    [source_snapshot] = snapshot_list(iceberg, source)
    [source_input] = [d for d in run["inputs"] if d["name"] == _name(iceberg, source)]
    assert snapshot_fields(source_input)["snapshotId"] == source_snapshot["id"]
    assert sorted(d["name"] for d in run["inputs"]) == sorted([_name(iceberg, target), _name(iceberg, source)])
    # 1 updated (a), 2 deleted (b), 3 matched but neither clause applies (kept, a), 4 inserted (x), 5 untouched (c)
    rows = iceberg.sql(f"SELECT id, v, other FROM {target} ORDER BY id")
    assert [tuple(row.values()) for row in rows] == [(1, 200, "a"), (3, 30, "a"), (4, 400, "x"), (5, 50, "c")]
    changed = snapshot_fields(run["outputs"][0])["partitions"]
    assert {"other": "c"} not in changed  # partition c was not touched
    assert {"other": "x"} in changed and {"other": "b"} in changed

    t, s = _name(iceberg, target), _name(iceberg, source)
    assert field_descriptions(run["outputs"][0]) == {
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
    assert dataset_edges(run["outputs"][0]) == {
        (t, "id", "INDIRECT", "JOIN", "(id = id)"),
        (s, "id", "INDIRECT", "JOIN", "(id = id)"),
        (s, "op", "INDIRECT", "FILTER", "(op = 'd')"),  # the DELETE clause decides which rows remain
    }


@pytest.mark.parametrize("mode", list(MODES))
def test_update_is_its_set_value_conditional_on_its_where(iceberg: IcebergSession, mode: str) -> None:
    name = mode.replace("-", "_")
    target, _ = _tables(iceberg, f"update_{name}", mode)
    iceberg.call(_sql, f"UPDATE {target} SET v = v + 1 WHERE id > 2")

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    assert [d["name"] for d in run["inputs"]] == [_name(iceberg, target)]
    t = _name(iceberg, target)
    # = INSERT OVERWRITE t SELECT id, IF(id > 2, v + 1, v), other FROM t, the IF split into its clause
    assert field_descriptions(run["outputs"][0]) == {
        "id": {(t, "id", "DIRECT", "IDENTITY", "")},
        "v": {
            (t, "v", "DIRECT", "TRANSFORMATION", "(v + 1)"),
            (t, "v", "DIRECT", "IDENTITY", ""),
            (t, "id", "INDIRECT", "CONDITIONAL", "(id > 2)"),
        },
        "other": {(t, "other", "DIRECT", "IDENTITY", "")},
    }
    assert dataset_edges(run["outputs"][0]) == {(t, "id", "INDIRECT", "FILTER", "(id > 2)")}


@pytest.mark.parametrize("mode", list(MODES))
def test_delete_keeps_every_column_and_filters_by_its_where(iceberg: IcebergSession, mode: str) -> None:
    name = mode.replace("-", "_")
    target, _ = _tables(iceberg, f"delete_{name}", mode)
    # rows of partition a stay: Iceberg cannot drop whole files, Spark rewrites (or marks) rows
    iceberg.call(_sql, f"DELETE FROM {target} WHERE v > 15 AND v < 40")

    run = _command_run(iceberg, target, MODES[mode][0])
    _read_and_committed(iceberg, run, target)
    t = _name(iceberg, target)
    assert field_descriptions(run["outputs"][0]) == {
        "id": {(t, "id", "DIRECT", "IDENTITY", "")},
        "v": {(t, "v", "DIRECT", "IDENTITY", "")},
        "other": {(t, "other", "DIRECT", "IDENTITY", "")},
    }
    assert dataset_edges(run["outputs"][0]) == {(t, "v", "INDIRECT", "FILTER", "((v > 15) AND (v < 40))")}
