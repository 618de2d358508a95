"""Row-level commands on Delta Lake tables (`MERGE INTO`, `UPDATE`, `DELETE`, which Delta runs as its
own `MergeIntoCommand`, `UpdateCommand`, `DeleteCommand`), on real Spark with the emitter attached
(`delta` fixture, tests/support/delta.py), on catalog tables (DeltaCatalog) and path tables: one run
per command, whose target is both its input (the version the command read: its `readVersion` in
`DESCRIBE HISTORY`) and its output (the version it committed, with the partitions it changed), and
column lineage exact per clause: the same statements and the same hand-written edges as Iceberg's
(tests/lakehouse/test_iceberg_row_level.py, shared in tests/support/lakehouse.py).

Functions taking `spark` first run in the fixture's child process (`DeltaSession.call`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.delta import DeltaSession
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
    field_edges,
    merge_lineage,
    partition_delete_lineage,
    snapshot_fields,
    update_lineage,
)
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

KINDS = ["catalog", "path"]


def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _tables(lake: DeltaSession, name: str, kind: str) -> tuple[str, str, str, str]:
    """A target `(id, v, other)` partitioned by `other` and an unpartitioned source, as catalog
    tables or path tables: (target as SQL names it, source as SQL names it, target's dataset name,
    source's dataset name)."""
    if kind == "catalog":
        target, source = f"{name}_target", f"{name}_source"
        target_name, source_name = str(lake.warehouse / target), str(lake.warehouse / source)
    else:
        target_name, source_name = str(lake.work / f"{name}_target"), str(lake.work / f"{name}_source")
        target, source = f"delta.`{target_name}`", f"delta.`{source_name}`"
    lake.call(
        _sql,
        f"CREATE TABLE {target} (id bigint, v int, other string) USING delta PARTITIONED BY (other)",
        f"INSERT INTO {target} VALUES {ROW_LEVEL_TARGET_ROWS}",
        f"CREATE TABLE {source} (id bigint, v int, op string) USING delta",
        f"INSERT INTO {source} VALUES {ROW_LEVEL_SOURCE_ROWS}",
    )
    return target, source, target_name, source_name


def _command_run(lake: DeltaSession, name: str, command: str) -> dict[str, Any]:
    """The one run of the command (`command`: its job name part) that wrote dataset `name`, valid by
    the spec: START and COMPLETE of one run id, no other run of that job."""
    events = lake.events()
    runs = [run for run in completed_writes(events) if [o["name"] for o in run["outputs"]] == [name]]
    [run] = [run for run in runs if str(run["job"]["name"]).split(".")[1] == command]
    assert_valid_event(run)
    same_job = [event for event in events if event["job"]["name"] == run["job"]["name"]]
    assert [(event["eventType"], event["run"]["runId"]) for event in same_job] == [
        ("START", run["run"]["runId"]),
        ("COMPLETE", run["run"]["runId"]),
    ]
    return run


def _read_and_committed(
    lake: DeltaSession, run: dict[str, Any], table: str, name: str, operation: str, partitions: list[dict[str, str]]
) -> None:
    """The target is the run's input at the version the command read (Delta's `readVersion`, the
    version before its commit) and its output at the version it committed, with the partitions it
    changed (written by hand per case)."""
    *_, committed = sorted(lake.history(table), key=lambda commit: int(commit["version"]))
    assert committed["operation"] == operation
    assert int(committed["readVersion"]) == int(committed["version"]) - 1
    [target_input] = [d for d in run["inputs"] if d["name"] == name]
    assert target_input["namespace"] == "file"
    assert snapshot_fields(target_input)["snapshotId"] == str(committed["readVersion"])
    assert snapshot_fields(target_input)["kind"] == "delta"
    assert "partitions" not in snapshot_fields(target_input)  # not known: Delta's index lists the committed version by then
    [output] = run["outputs"]
    assert output["namespace"] == "file"
    assert snapshot_fields(output) == {"snapshotId": str(committed["version"]), "kind": "delta", "partitions": partitions}


@pytest.mark.parametrize("kind", KINDS)
def test_merge_is_one_run_reading_and_writing_its_target_with_lineage_per_clause(delta: DeltaSession, kind: str) -> None:
    target, source, target_name, source_name = _tables(delta, f"merge_{kind}", kind)
    delta.call(_sql, MERGE_STATEMENT.format(target=target, source=source))

    run = _command_run(delta, target_name, "merge_into_command")
    # partition a: row 1 updated; b: row 2 deleted; x: row 4 inserted; c untouched
    _read_and_committed(delta, run, target, target_name, "MERGE", [{"other": "a"}, {"other": "b"}, {"other": "x"}])
    assert sorted(d["name"] for d in run["inputs"]) == sorted([target_name, source_name])
    [source_input] = [d for d in run["inputs"] if d["name"] == source_name]
    *_, source_commit = delta.history(source)
    assert snapshot_fields(source_input)["snapshotId"] == str(source_commit["version"])
    rows = delta.sql(f"SELECT id, v, other FROM {target} ORDER BY id")
    assert [tuple(row.values()) for row in rows] == MERGED_ROWS

    columns, dataset = merge_lineage(target_name, source_name)
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


@pytest.mark.parametrize("kind", KINDS)
def test_update_is_its_set_value_conditional_on_its_where(delta: DeltaSession, kind: str) -> None:
    target, _, target_name, _ = _tables(delta, f"update_{kind}", kind)
    delta.call(_sql, UPDATE_STATEMENT.format(target=target))

    run = _command_run(delta, target_name, "update_command")
    _read_and_committed(delta, run, target, target_name, "UPDATE", [{"other": "a"}, {"other": "c"}])  # ids 3 and 5
    assert [d["name"] for d in run["inputs"]] == [target_name]
    columns, dataset = update_lineage(target_name)
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


@pytest.mark.parametrize("kind", KINDS)
def test_delete_keeps_every_column_and_filters_by_its_where(delta: DeltaSession, kind: str) -> None:
    target, _, target_name, _ = _tables(delta, f"delete_{kind}", kind)
    delta.call(_sql, DELETE_STATEMENT.format(target=target))

    run = _command_run(delta, target_name, "delete_command")
    _read_and_committed(delta, run, target, target_name, "DELETE", [{"other": "a"}, {"other": "b"}])  # ids 2 and 3
    assert [d["name"] for d in run["inputs"]] == [target_name]
    columns, dataset = delete_lineage(target_name)
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


def test_a_delete_of_whole_partitions_is_one_run_too(delta: DeltaSession) -> None:
    """Delta drops the partition's files from its log without reading them: the same run."""
    target, _, target_name, _ = _tables(delta, "partition_delete", "catalog")
    delta.call(_sql, PARTITION_DELETE_STATEMENT.format(target=target))

    run = _command_run(delta, target_name, "delete_command")
    _read_and_committed(delta, run, target, target_name, "DELETE", [{"other": "a"}])
    *_, committed = delta.history(target)
    assert committed["operationMetrics"]["numAddedFiles"] == "0"  # no file rewritten
    columns, dataset = partition_delete_lineage(target_name)
    assert field_descriptions(run["outputs"][0]) == columns
    assert dataset_edges(run["outputs"][0]) == dataset


def _without_descriptions(edges: set[tuple[str, str, str, str, str]]) -> set[tuple[str, str, str, str]]:
    return {edge[:4] for edge in edges}


def test_update_and_delete_answer_as_the_insert_overwrite_doing_the_same(delta: DeltaSession) -> None:
    """Where an `INSERT OVERWRITE ... SELECT` of the table itself does what the command does, both give
    the same edges (types and subtypes), but for what the command tells more exactly: an UPDATE's
    `IF` split into its clause (the column's own value IDENTITY beside the SET value, not one
    TRANSFORMATION of the whole `IF`) and its WHERE as FILTER; a DELETE's filter as the statement
    wrote it rather than its negation."""
    target, _, name, _ = _tables(delta, "equivalent", "catalog")
    delta.call(
        _sql,
        f"INSERT OVERWRITE {target} SELECT id, IF(id > 2, v + 1, v) AS v, other FROM {target}",
        UPDATE_STATEMENT.format(target=target),
        f"INSERT OVERWRITE {target} SELECT * FROM {target} WHERE NOT (v > 15 AND v < 40)",
        DELETE_STATEMENT.format(target=target),
    )
    runs = [run for run in completed_writes(delta.events()) if [o["name"] for o in run["outputs"]] == [name]]
    [_, overwrite_as_update, update, overwrite_as_delete, delete] = [run["outputs"][0] for run in runs]  # the first: the INSERT

    update_columns = field_edges(update)
    assert (
        update_columns["v"] - {(name, "v", "DIRECT", "IDENTITY")}
        == field_edges(overwrite_as_update)["v"]
        == {
            (name, "v", "DIRECT", "TRANSFORMATION"),
            (name, "id", "INDIRECT", "CONDITIONAL"),
        }
    )
    assert {column: edges for column, edges in update_columns.items() if column != "v"} == {
        column: edges for column, edges in field_edges(overwrite_as_update).items() if column != "v"
    }
    assert dataset_edges(overwrite_as_update) == set()
    assert dataset_edges(update) == {(name, "id", "INDIRECT", "FILTER", "(id > 2)")}

    assert field_edges(delete) == field_edges(overwrite_as_delete)
    assert _without_descriptions(dataset_edges(delete)) == _without_descriptions(dataset_edges(overwrite_as_delete))
    assert dataset_edges(delete) == {(name, "v", "INDIRECT", "FILTER", "((v > 15) AND (v < 40))")}
