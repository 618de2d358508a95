"""Listing a local dataset directory for output snapshots (real files, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emitter import snapshots
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
    listed = sorted((Path(path).relative_to(tmp_path).as_posix(), size) for path, size, _ in files.local_listing(f"file:{tmp_path}"))
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
