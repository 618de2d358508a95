"""Snapshot ids from plain listings and offsets (emitter.snapshots is pure: no Spark here)."""

from __future__ import annotations

import copy
import json
from typing import Any

import attrs
import pytest
from openlineage.client.serde import Serde

from emitter import facets as emitter_facets
from emitter import snapshots
from emitter.snapshots import DataFile
from tests.support.paths import PROJECT_ROOT
from tests.support.spec import spec_errors

PRODUCER = "https://example.com/tests"
ROOT = "file:/warehouse/sales"
LISTING = [
    ("file:/warehouse/sales/dt=20240501/part-0.parquet", 100, 1000),
    ("file:/warehouse/sales/dt=20240502/part-0.parquet", 200, 2000),
    ("file:/warehouse/sales/_SUCCESS", 0, 2000),
    ("file:/warehouse/sales/dt=20240502/.part-0.parquet.crc", 12, 2000),
    ("file:/warehouse/sales/_temporary/0/part-9.parquet", 50, 2000),
    ("file:/warehouse/sales/.hidden/part-8.parquet", 50, 2000),
    ("file:/warehouse/sales/dt=20240503/part-1.parquet._COPYING_", 50, 2000),
    ("file:/elsewhere/part-0.parquet", 10, 2000),
]


def test_data_files_keep_committed_files_under_the_root_only() -> None:
    files = snapshots.data_files(ROOT, LISTING)
    assert [f.relative_path for f in files] == ["dt=20240501/part-0.parquet", "dt=20240502/part-0.parquet"]


def test_content_id_ignores_listing_order_uri_form_and_modification_times() -> None:
    as_listed = snapshots.content_snapshot_id(snapshots.data_files(ROOT, LISTING))
    reordered = snapshots.data_files(
        "file:///warehouse/sales/", [(p.replace("file:", "file://"), s, 0) for p, s, _ in reversed(LISTING)]
    )
    assert snapshots.content_snapshot_id(reordered) == as_listed
    assert (
        snapshots.content_snapshot_id(snapshots.data_files("/warehouse/sales", [(p[5:], s) for p, s, _ in LISTING])) == as_listed
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda files: files[:-1],  # a file removed
        lambda files: [*files, DataFile("dt=20240503/part-0.parquet", 1)],  # a file added
        lambda files: [DataFile(files[0].relative_path, files[0].size + 1), *files[1:]],  # a file rewritten
    ],
)
def test_content_id_changes_with_the_committed_content(change: Any) -> None:
    files = list(snapshots.data_files(ROOT, LISTING))
    assert snapshots.content_snapshot_id(change(files)) != snapshots.content_snapshot_id(files)


def test_partitions_written_are_the_partitions_of_files_newer_than_the_write() -> None:
    files = snapshots.data_files(ROOT, LISTING)
    assert snapshots.partitions_written(files, since_ms=1500) == ({"dt": "20240502"},)
    assert snapshots.partitions_written(files) == ({"dt": "20240501"}, {"dt": "20240502"})
    escaped = [DataFile("region=eu%2Fwest/dt=__HIVE_DEFAULT_PARTITION__/x.parquet", 1)]
    assert snapshots.partitions_written(escaped) == ({"region": "eu/west", "dt": None},)
    assert snapshots.partitions_written([DataFile("part-0.parquet", 1)]) == ()


def _sink_log(*entries: tuple[str, int, str]) -> str:
    return "v1\n" + "".join(
        json.dumps(
            {"path": p, "size": s, "isDir": False, "modificationTime": 0, "blockReplication": 1, "blockSize": 1, "action": a}
        )
        + "\n"
        for p, s, a in entries
    )


def test_file_sink_snapshot_reads_the_committed_files_of_a_batch_from_the_sink_log() -> None:
    root = "file:/out"
    log = [
        (0, _sink_log(("file:///out/dt=1/a.parquet", 10, "add"))),
        (1, _sink_log(("file:///out/dt=2/b.parquet", 20, "add"))),
        (2, _sink_log(("file:///out/dt=1/a.parquet", 10, "delete"), ("file:///out/dt=3/c.parquet", 30, "add"))),
    ]
    after_0 = snapshots.file_sink_batch_snapshot(root, log, 0)
    after_1 = snapshots.file_sink_batch_snapshot(root, log, 1)
    after_2 = snapshots.file_sink_batch_snapshot(root, log, 2)
    listed_after_1 = snapshots.data_files(root, [("file:/out/dt=2/b.parquet", 20), ("file:/out/dt=1/a.parquet", 10)])
    assert after_1.snapshot_id == snapshots.content_snapshot_id(listed_after_1)
    assert (after_1.batch_id, after_1.partitions) == (1, ({"dt": "2"},))
    assert len({after_0.snapshot_id, after_1.snapshot_id, after_2.snapshot_id}) == 3
    assert after_2.partitions == ({"dt": "3"},)
    compacted = [(1, _sink_log(("file:///out/dt=1/a.parquet", 10, "add"), ("file:///out/dt=2/b.parquet", 20, "add")))]
    assert snapshots.file_sink_batch_snapshot(root, compacted, 1).snapshot_id == after_1.snapshot_id


def test_stream_offsets_snapshot_is_stable_for_the_same_range_and_keeps_spark_offsets() -> None:
    first = snapshots.stream_offsets_snapshot("KafkaV2[Subscribe[orders]]", None, '{"orders":{"0":42}}', 0)
    again = snapshots.stream_offsets_snapshot("KafkaV2[Subscribe[orders]]", None, {"orders": {"0": 42}}, 0)
    later = snapshots.stream_offsets_snapshot("KafkaV2[Subscribe[orders]]", '{"orders":{"0":42}}', '{"orders":{"0":50}}', 1)
    assert first.snapshot_id == again.snapshot_id != later.snapshot_id
    assert (later.start_offset, later.end_offset, later.kind) == ({"orders": {"0": 42}}, {"orders": {"0": 50}}, "stream-offsets")


def test_latest_delta_version_is_the_highest_commit_of_the_log() -> None:
    names = [
        "00000000000000000000.json",
        "00000000000000000001.json",
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000011.json",
        "_last_checkpoint",
        "00000000000000000012.json.tmp",
    ]
    assert snapshots.latest_delta_version(names) == 11
    assert snapshots.latest_delta_version(["_last_checkpoint"]) is None
    assert snapshots.table_version_snapshot("delta", 11) == snapshots.Snapshot("11", "delta")


def _delta_commit_text(timestamp_ms: int, *changes: tuple[str, dict[str, str | None], bool]) -> str:
    lines = [{"commitInfo": {"timestamp": timestamp_ms, "operation": "WRITE"}}]
    lines += [
        {kind: {"path": "f.parquet", "partitionValues": values, "dataChange": data_change}}
        for kind, values, data_change in changes
    ]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_a_delta_write_is_versioned_by_the_first_commit_since_it_began_with_the_partitions_it_touched() -> None:
    commits = [
        snapshots.parse_delta_commit(4, _delta_commit_text(1_000, ("add", {"dt": "a"}, True))),
        snapshots.parse_delta_commit(
            5, _delta_commit_text(2_000, ("add", {"dt": "b"}, True), ("remove", {"dt": "c"}, True), ("add", {"dt": "z"}, False))
        ),
        snapshots.parse_delta_commit(6, _delta_commit_text(3_000, ("add", {"dt": None}, True))),  # a later action's
    ]
    assert snapshots.delta_commit_snapshot(commits, since_ms=1_500) == snapshots.Snapshot(
        "5", "delta", partitions=({"dt": "b"}, {"dt": "c"})
    )
    # nothing committed since (a write that changed nothing): the table's newest version
    assert snapshots.delta_commit_snapshot(commits, since_ms=9_000) == snapshots.Snapshot(
        "6", "delta", partitions=({"dt": None},)
    )
    assert snapshots.delta_commit_snapshot([], since_ms=0) is None


def _event_with(dataset_facets: dict[str, Any], run_facets: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventType": "RUNNING",
        "eventTime": "2024-05-01T00:00:00+00:00",
        "run": {"runId": "0190a3c2-1d2e-7a4b-8c5d-6e7f8a9b0c1d", "facets": run_facets},
        "job": {"namespace": "tests", "name": "snapshots"},
        "inputs": [{"namespace": "file", "name": "/in", "facets": dataset_facets}],
        "outputs": [],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def test_facets_validate_against_our_schemas_and_the_schemas_catch_mistakes() -> None:
    snapshot = snapshots.stream_offsets_snapshot("FileStreamSource[file:/in]", {"logOffset": 0}, {"logOffset": 1}, 1)
    facets = {name: Serde.to_dict(facet) for name, facet in emitter_facets.snapshot_facets(snapshot).items()}
    batch = snapshots.MicroBatch(1, "q", "r", 5, "file:/ck", 12)
    event = _event_with(facets, {"microBatch": Serde.to_dict(emitter_facets.micro_batch_facet(batch))})
    original = copy.deepcopy(event)
    assert spec_errors(event) == []
    assert event == original
    assert facets["version"]["datasetVersion"] == facets["snapshot"]["snapshotId"]

    bad_kind = copy.deepcopy(event)
    bad_kind["inputs"][0]["facets"]["snapshot"]["kind"] = "guess"
    no_batch = copy.deepcopy(event)
    del no_batch["run"]["facets"]["microBatch"]["batchId"]
    assert spec_errors(bad_kind) and spec_errors(no_batch)


def test_unknown_snapshot_gives_no_facets() -> None:
    assert emitter_facets.snapshot_facets(None) == {}


@pytest.mark.parametrize(
    ("facet_class", "schema_file"),
    [
        (emitter_facets.SnapshotDatasetFacet, "SnapshotDatasetFacet.json"),
        (emitter_facets.MicroBatchRunFacet, "MicroBatchRunFacet.json"),
    ],
)
def test_facet_classes_are_the_schemas_in_schemas_dir(facet_class: Any, schema_file: str) -> None:
    """One definition: the class's fields, required ones and `_schemaURL` are the schema's."""
    schema = json.loads((PROJECT_ROOT / "schemas" / "1-0-0" / schema_file).read_text())
    name = schema_file.removesuffix(".json")
    body = schema["$defs"][name]["allOf"][1]
    fields = {f.name: f for f in attrs.fields(facet_class) if not f.name.startswith("_")}
    assert set(fields) == set(body["properties"])
    assert {n for n, f in fields.items() if f.default is attrs.NOTHING} == set(body["required"])
    assert facet_class._get_schema() == f"{schema['$id']}#/$defs/{name}"


# What Iceberg's SparkTable.properties() returns for a table with one commit
ICEBERG_PROPERTIES = {
    "provider": "iceberg",
    "format": "iceberg/parquet",
    "current-snapshot-id": "8744736658442914487",
    "location": "s3://lake/db/orders",
    "format-version": "2",
}


def test_an_iceberg_table_is_versioned_by_its_current_snapshot_unless_a_read_is_pinned() -> None:
    assert snapshots.v2_table_version(ICEBERG_PROPERTIES) == ("iceberg", "8744736658442914487")
    assert snapshots.v2_table_version(ICEBERG_PROPERTIES, "42") == ("iceberg", "42")
    assert snapshots.v2_table_version({**ICEBERG_PROPERTIES, "current-snapshot-id": "none"}) is None
    assert snapshots.v2_table_version({"provider": "parquet", "current-snapshot-id": "1"}) is None
    assert snapshots.v2_table_version({}) is None
