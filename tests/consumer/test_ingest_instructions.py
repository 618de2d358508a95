"""benchmarks.ingest_instructions' driver (what valgrind counts): it stores a workload file's events
in a fresh store of the tree it is given, and refuses a tree whose consumer it does not import."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import create_engine, func, select

from benchmarks.ingest_instructions import driver_command, store_prepared, write_workload
from consumer.ingest import store_writes
from consumer.ingest.prepare import Preparer
from consumer.ingest.store_writes import StoreWrites
from consumer.store import open_store
from consumer.store.schema import runs
from tests.support.paths import PROJECT_ROOT


def _drive(tree: Path, events: Path, count: int, store_url: str) -> subprocess.CompletedProcess[str]:
    environment = {"PYTHONPATH": str(tree), "LINEAGE_DRIVER_STORE_URL": store_url, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        driver_command(tree, events, count), env=environment, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_driver_stores_the_events_it_is_given(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_workload(events, "new", 6)  # 6 runs, 12 events
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    run = _drive(PROJECT_ROOT, events, 8, store_url)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "8 events stored"
    engine = create_engine(store_url)
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(runs)).scalar_one() == 4
    engine.dispose()


def test_a_prepared_batch_is_stored_as_folded_without_folding_it_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest loop stores the fold its preparing step made; counting a second fold per batch
    would count work the consumer does not do."""
    events = tmp_path / "events.jsonl"
    write_workload(events, "new", 3)
    batch = events.read_bytes().splitlines()
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    prepared = Preparer(None, in_worker=False).submit(batch)()

    def folded_again(*_: object, **__: object) -> NoReturn:
        raise AssertionError("the batch was folded a second time")

    monkeypatch.setattr(store_writes, "fold", folded_again)
    assert store_prepared(StoreWrites(store), batch, prepared) == 6
    store.dispose()


def test_a_tree_whose_consumer_is_not_imported_is_refused(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    write_workload(events, "new", 1)
    run = _drive(tmp_path, events, 2, f"sqlite:///{tmp_path / 'store.db'}")
    assert run.returncode != 0 and "not" in run.stderr and "PYTHONPATH" in run.stderr
