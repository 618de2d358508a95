"""Listing a local dataset directory for output snapshots (real files, no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emitter import snapshots
from emitter.capture import RelationInfo
from emitter.listener import files


def _table(root: Path) -> None:
    for relative, size in {
        "dt=1/part-0.parquet": 3,
        "dt=2/part-0.parquet": 5,
        "dt=2/.part-0.parquet.crc": 1,
        "_SUCCESS": 0,
        "_temporary/0/task/part-9.parquet": 7,
        "_delta_log/00000000000000000000.json": 2,
    }.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


def test_local_listing_skips_hidden_files_and_directories(tmp_path: Path) -> None:
    _table(tmp_path)
    listed = sorted(
        (Path(path).relative_to(tmp_path).as_posix(), size) for path, size, _ in files.local_listing(f"file:{tmp_path}")
    )
    assert listed == [("dt=1/part-0.parquet", 3), ("dt=2/part-0.parquet", 5)]


def test_output_snapshot_of_a_local_table_matches_the_pure_id_of_its_data_files(tmp_path: Path) -> None:
    _table(tmp_path)
    snapshot = files.output_snapshot(None, None, f"file://{tmp_path}/", written_since_ms=None)
    expected = snapshots.content_snapshot_id(
        [snapshots.DataFile("dt=1/part-0.parquet", 3), snapshots.DataFile("dt=2/part-0.parquet", 5)]
    )
    assert snapshot is not None and snapshot.snapshot_id == expected
    assert snapshot.partitions == ({"dt": "1"}, {"dt": "2"})


def test_listing_is_bounded(tmp_path: Path) -> None:
    _table(tmp_path)
    with pytest.raises(files.TooManyFiles):
        files.local_listing(str(tmp_path), max_files=1)


def test_a_local_delta_table_is_versioned_by_its_log(tmp_path: Path) -> None:
    _table(tmp_path)
    (tmp_path / "_delta_log" / "00000000000000000001.json").write_text("{}")
    snapshot = files.delta_log_snapshot(f"file:{tmp_path}")
    assert snapshot == snapshots.Snapshot("1", "delta")


def _sink_log_line(path: str, size: int) -> str:
    return json.dumps(
        {
            "path": path,
            "size": size,
            "isDir": False,
            "modificationTime": 0,
            "blockReplication": 1,
            "blockSize": 1,
            "action": "add",
        }
    )


def test_file_sink_snapshot_reads_only_the_log_files_it_needs(tmp_path: Path) -> None:
    log_dir = tmp_path / "_spark_metadata"
    log_dir.mkdir()
    files_so_far: list[str] = []
    for batch in range(11):
        path = f"file://{tmp_path}/part-{batch}.parquet"
        files_so_far.append(_sink_log_line(path, batch + 1))
        lines = files_so_far if batch == 9 else [files_so_far[-1]]  # batch 9 compacts 0..9
        name = f"{batch}.compact" if batch == 9 else str(batch)
        (log_dir / name).write_text("v1\n" + "\n".join(lines) + "\n")

    assert [batch for batch, _ in files.read_file_sink_log(f"file:{tmp_path}", 10)] == [9, 10]
    assert [batch for batch, _ in files.read_file_sink_log(f"file:{tmp_path}", 9)] == list(range(10))
    after_10 = files.file_sink_snapshot(f"file:{tmp_path}", 10)
    every_file = [snapshots.DataFile(f"part-{batch}.parquet", batch + 1) for batch in range(11)]
    assert after_10 is not None and after_10.snapshot_id == snapshots.content_snapshot_id(every_file)
    assert after_10.batch_id == 10


def test_a_table_version_read_off_the_live_table_wins_over_listing_its_location(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.parquet").write_bytes(b"x" * 10)
    relation = RelationInfo(
        node_class="DataSourceV2Relation",
        table_location=f"file:{tmp_path}",
        format="iceberg",
        table_version=("iceberg", "8744736658442914487"),
    )
    assert files.relation_snapshot(None, None, relation, None, True) == snapshots.Snapshot("8744736658442914487", "iceberg")
    unversioned = RelationInfo(node_class="DataSourceV2Relation", table_location=f"file:{tmp_path}")
    assert files.relation_snapshot(None, None, unversioned, None, False).kind == "content"
