"""Data lineage (`snapshot_lineage`, `partition_lineage`): the snapshot of each dataset a run or
micro-batch read or wrote (a batch run's barrier id is its number), and the partitions of each."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from consumer.store.rows import DatasetKey, Folded
from consumer.store.schema import partition_lineage, snapshot_lineage
from consumer.store.writer.batch import Batch

# A snapshot row's key as folded (run uuid, micro-batch id, dataset, direction), and as stored
# (run id, barrier id, dataset id, direction).
FoldedKey = tuple[str, int | None, DatasetKey, str]
StoredKey = tuple[int, int, int, str]


def write_snapshots(
    batch: Batch,
    folded: Folded,
    job_ids: dict[tuple[str, str], int],
    dataset_ids: dict[DatasetKey, int],
    run_ids: dict[str, int],
    run_seqs: dict[str, int],
) -> dict[FoldedKey, StoredKey]:
    """Write the batch's snapshot rows (a batch run's barrier id is its number: two of its rows
    may meet there, and the newer wins); each folded key's stored key."""
    values: dict[StoredKey, dict[str, Any]] = {}
    chosen: dict[StoredKey, tuple[datetime, int]] = {}
    stored_keys: dict[FoldedKey, StoredKey] = {}
    for run, job, batch_id, dataset, direction, snapshot, kind, partitions, start, end, created_at, position in folded.snapshots:
        barrier_id = batch_id if batch_id is not None else run_seqs[run]
        key = (run_ids[run], barrier_id, dataset_ids[dataset], direction)
        stored_keys[(run, batch_id, dataset, direction)] = key
        if key in chosen and chosen[key] > (created_at, position):
            continue
        chosen[key] = (created_at, position)
        values[key] = {
            "run_id": key[0],
            "job_id": job_ids[job],
            "barrier_id": barrier_id,
            "dataset_id": key[2],
            "direction": direction,
            "snapshot_id": snapshot,
            "kind": kind,
            "partitions": partitions,
            "start_offset": start,
            "end_offset": end,
            "created_at": created_at,
        }
    if values:
        statement = batch.insert(snapshot_lineage)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["run_id", "barrier_id", "dataset_id", "direction"],
            set_={
                name: excluded[name] for name in ("snapshot_id", "kind", "partitions", "start_offset", "end_offset", "created_at")
            },
            where=excluded.created_at >= snapshot_lineage.c.created_at,
        )
        batch.many(statement, [values[key] for key in sorted(values)])
    return stored_keys


def write_partitions(batch: Batch, folded: Folded, snapshot_keys: Mapping[FoldedKey, StoredKey]) -> None:
    """The partitions each snapshot_lineage row's run read or wrote: the union over its events
    (so any order or batching of them gives the same rows), keyed to that row."""
    wanted: dict[StoredKey, set[str]] = defaultdict(set)
    for folded_key, names in folded.partitions.items():
        wanted[snapshot_keys[folded_key]].update(names)
    if not wanted:
        return
    c = snapshot_lineage.c
    snapshot_ids = batch.select_ids(snapshot_lineage, [c.run_id, c.barrier_id, c.dataset_id, c.direction], sorted(wanted))
    values = [
        {"snapshot_lineage_id": snapshot_ids[key], "dataset_id": key[2], "direction": key[3], "partition_name": name}
        for key in sorted(wanted)
        for name in sorted(wanted[key])
    ]
    statement = batch.insert(partition_lineage).on_conflict_do_nothing(index_elements=["snapshot_lineage_id", "partition_name"])
    batch.many(statement, values)
