"""Raw events (`lineage_events`): which of a batch's events are stored already, and the new ones'
rows (their text compressed while the batch was prepared)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from consumer.store.rows import Folded, RawEvent
from consumer.store.schema import chunks, lineage_events
from consumer.store.writer.batch import Batch


def not_stored(batch: Batch, hashes: Sequence[str]) -> set[str]:
    """The hashes of the batch's events whose raw event is not stored yet."""
    stored: set[str] = set()
    for chunk in chunks(sorted(hashes)):
        stored.update(
            batch.connection.execute(
                select(lineage_events.c.content_hash).where(lineage_events.c.content_hash.in_(chunk))
            ).scalars()
        )
    return set(hashes) - stored


def write_raw_events(batch: Batch, folded: Folded) -> None:
    batch.many(
        batch.insert(lineage_events).on_conflict_do_nothing(index_elements=["content_hash"]),
        [dict(zip(RawEvent._fields, raw, strict=True), received_at=batch.now) for raw in folded.raw],
    )
