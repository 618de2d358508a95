"""The write side of the store: one folded batch (consumer.store.rows: its rows by natural key) ->
a fixed, small number of set-based statements per table (one upsert for all its rows, see
store/bulk.py, and one keyed select for the row ids), all in the caller's transaction.

What the fold computed from the batch alone is merged here with what the store holds, under the
same rules (consumer.store.rows), so every derived row is a function of the SET of events stored,
never of their order, batching or arrival time: any permutation of the same events, split into
any batches by any number of writers, builds the same store. Besides those rules:
- a dataset's `updated_at` is its latest own event; only a dataset known from column-lineage
  edges alone takes the edges' times;
- a job's runs are numbered 1, 2, ... (`run_seq`) in the order of their first event time (ties by
  run id), renumbered when an earlier run arrives late.

On PostgreSQL several writers may write at once: each transaction first takes advisory locks on
the jobs, datasets and runs of its batch in one global (sorted) order, and every upsert sends its
rows sorted by key, so row locks are taken in one order too: no deadlocks, no lost updates.

`write_batch` is the one entry: it orders the table families' writes in the transaction. Each
family's write rules, and the reads they need, are in a module of their own:
- batch: the context they share (connection, bulk statements, locks, keyed reads and upserts);
- raw_events: `lineage_events`;
- namespaces: `namespaces`;
- datasets: `datasets` and `dataset_fields`;
- jobs: `jobs` (and the jobs a batch leaves as they are);
- runs: `runs` and their numbering;
- job_versions: `job_versions` (a run's version, a JobEvent's declared version);
- dataset_versions: `dataset_versions` and `dataset_version_contents`;
- snapshots: `snapshot_lineage` and `partition_lineage`;
- current_lineage: `job_io` and `column_lineage` (each job's current version)."""

from __future__ import annotations

from collections.abc import Callable, Set

from sqlalchemy import Connection

from consumer.store.bulk import overlapped
from consumer.store.rows import Folded
from consumer.store.writer.batch import Batch
from consumer.store.writer.current_lineage import write_current_lineage
from consumer.store.writer.dataset_versions import write_dataset_versions, write_version_contents
from consumer.store.writer.datasets import write_datasets, write_fields
from consumer.store.writer.job_versions import write_declared_versions
from consumer.store.writer.jobs import write_jobs
from consumer.store.writer.namespaces import write_namespaces
from consumer.store.writer.raw_events import not_stored, write_raw_events
from consumer.store.writer.runs import write_runs
from consumer.store.writer.snapshots import write_partitions, write_snapshots

__all__ = ["write_batch"]


def write_batch(
    connection: Connection, folded: Folded, refold: Callable[[Set[str]], Folded] | None = None, *, store_raw: bool = True
) -> int:
    """Upsert `folded` (raw events too unless `store_raw` is False, as in replay); the number of
    events that were new. Events already stored are skipped whole: when some of the batch's are,
    `refold(hashes of the others)` gives the batch without them."""
    batch = Batch(connection)
    batch.size_memory()
    batch.lock_keys(folded.lock_ids)
    if store_raw:
        fresh = not_stored(batch, folded.hashes)
        if not fresh:
            return 0
        if len(fresh) < len(folded.hashes):
            if refold is None:
                raise ValueError("some events of the batch are stored already: a refold is needed")
            folded = refold(fresh)
    _write_derived(batch, folded, store_raw=store_raw)
    return folded.events


def _write_derived(batch: Batch, folded: Folded, *, store_raw: bool) -> None:
    """Every table family's rows, in the order their ids are needed."""
    namespace_ids = write_namespaces(batch, folded)
    dataset_ids, field_clocks = write_datasets(batch, folded, namespace_ids)
    field_ids = write_fields(batch, folded, dataset_ids, field_clocks)
    job_ids, retired_jobs = write_jobs(batch, folded, namespace_ids)
    run_ids, run_seqs, run_jobs = write_runs(batch, folded, job_ids)
    content_ids = write_version_contents(batch, folded)
    # Nothing in this block reads back: each statement runs while the next one's rows are built.
    with overlapped(batch.connection):
        if store_raw:
            write_raw_events(batch, folded)
        write_dataset_versions(batch, folded, dataset_ids, run_ids, content_ids)
        snapshot_keys = write_snapshots(batch, folded, job_ids, dataset_ids, run_ids, run_seqs)
    write_partitions(batch, folded, snapshot_keys)
    touched_jobs = set(job_ids.values()) | set(run_jobs)
    write_declared_versions(batch, folded, job_ids)
    write_current_lineage(batch, touched_jobs, retired_jobs, dataset_ids, field_ids)
