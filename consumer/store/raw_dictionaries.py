"""The zstd dictionaries of a store's raw events (table `raw_event_dictionaries`).

Writers compress with the store's current dictionary, once it has one: the first time a writer
finds the store holding TRAIN_AFTER_EVENTS raw events and no dictionary, it trains one on the newest
events (at most SAMPLE_EVENTS of them, SAMPLE_BYTES of text) and stores it. That is done once per
store; two writers that train at the same time store two dictionaries (the same one, under one id,
when they trained on the same events), and each compresses with its own: every frame names its
dictionary, so any of them reads back.

Readers decompress through `text`: a frame's dictionary is looked up by the id in its header, loaded
from the table the first time and cached for good (a dictionary's row never changes). Frames without
a dictionary (those written before the store had one) read as ever."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone

import attrs
from sqlalchemy import Connection, Engine, bindparam, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from consumer.store.compressed_text import Dictionary, UnknownDictionary, compress, decompress, dictionary_id, train
from consumer.store.schema import lineage_events, raw_event_dictionaries

log = logging.getLogger(__name__)

# From this many raw events on, a store without a dictionary trains one. On the ingest benchmark's
# events a dictionary trained on 250 of them compresses as well as one trained on 2,000 (about 280 B
# instead of 1,160 B per event); real events vary more, so more samples, and a thousand events kept
# without a dictionary cost about 1 MB.
TRAIN_AFTER_EVENTS = 1000
# Training runs on the writer's thread and holds up ingestion while it runs. Its cost grows with
# the bytes sampled: on TPC-DS CTAS events (about 22 KB each) 23 MB took 1.4 s of CPU and 4 MB 0.25 s,
# and both dictionaries compressed those events to the same size (about 740 B), as did 2 MB.
SAMPLE_EVENTS = 1000
SAMPLE_BYTES = 4 * 1024 * 1024
# After a failed training (too few or too small events to train on, the database away), when to try again.
RETRY_AFTER_SECONDS = 600.0

# Raw events rewritten per transaction by `recompress`.
RECOMPRESS_CHUNK = 1000

Writing = Callable[[], AbstractContextManager[Connection]]


@attrs.frozen
class Recompressed:
    """What `recompress` did: the events it rewrote, and their payloads' bytes before and after."""

    events: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


class RawDictionaries:
    """One store's dictionaries: `current` for writers, `text` for readers, `train_if_due` for writers
    after each batch. Safe to share between threads."""

    def __init__(self, engine: Engine, writing: Writing | None = None, *, train_after_events: int = TRAIN_AFTER_EVENTS) -> None:
        self.engine = engine
        self.writing = writing
        self.train_after_events = train_after_events
        self._by_id: dict[int, Dictionary] = {}
        self._current: Dictionary | None = None
        self._training = threading.Lock()
        self._retry_at = 0.0

    def current(self) -> Dictionary | None:
        """The dictionary this process compresses new raw events with (None: none yet)."""
        return self._current

    def text(self, payload: bytes) -> str:
        """A stored raw event's text."""
        return decompress(payload, self.by_id)

    def by_id(self, dictionary_id: int) -> Dictionary:
        found = self._by_id.get(dictionary_id)
        if found is None:
            with self.engine.connect() as connection:
                row = connection.execute(
                    select(raw_event_dictionaries.c.data).where(raw_event_dictionaries.c.id == dictionary_id)
                ).first()
            if row is None:
                raise UnknownDictionary(f"raw event dictionary {dictionary_id} is not in the store")
            found = self._by_id[dictionary_id] = Dictionary(dictionary_id, bytes(row.data))
        return found

    def train_if_due(self) -> Dictionary | None:
        """The current dictionary: the one this process knows, else the store's newest, else one
        trained now if the store holds enough raw events (None: not yet). A database error is
        logged, not raised: the events stored meanwhile are compressed without a dictionary."""
        if self._current is not None:
            return self._current
        if not self._training.acquire(blocking=False):  # another thread of this process is at it
            return None
        try:
            self._current = self._stored_or_trained()
        except DBAPIError as error:
            self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
            log.warning("no raw event dictionary this time: %s", str(error.orig or error).splitlines()[0])
        except Exception:  # training runs after a batch is stored: it must not fail ingestion
            self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
            log.exception("no raw event dictionary this time")
        finally:
            self._training.release()
        return self._current

    def _stored_or_trained(self) -> Dictionary | None:
        stored = self._newest()
        if stored is not None or time.monotonic() < self._retry_at or self._event_count() < self.train_after_events:
            return stored
        samples = self._samples()
        started = time.process_time()
        try:
            trained = train(samples)
        except ValueError as error:
            self._retry_at = time.monotonic() + RETRY_AFTER_SECONDS
            log.warning("raw events stay compressed without a dictionary for now: %s", error)
            return None
        self.add(trained)
        log.info(
            "trained raw event dictionary %d on %d events (%.2f s of CPU): new raw events are compressed with it",
            trained.id,
            len(samples),
            time.process_time() - started,
        )
        return self.by_id(trained.id)

    def _newest(self) -> Dictionary | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(raw_event_dictionaries.c.id, raw_event_dictionaries.c.data)
                .order_by(raw_event_dictionaries.c.created_at.desc(), raw_event_dictionaries.c.id.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        return self._by_id.setdefault(row.id, Dictionary(row.id, bytes(row.data)))

    def _event_count(self) -> int:
        """How many raw events the store holds, counted up to `train_after_events` (an index scan of that many ids)."""
        with self.engine.connect() as connection:
            some = select(lineage_events.c.id).limit(self.train_after_events).subquery()
            return int(connection.execute(select(func.count()).select_from(some)).scalar_one())

    def _samples(self) -> list[str]:
        texts: list[str] = []
        size = 0
        with self.engine.connect() as connection:
            newest = select(lineage_events.c.payload).order_by(lineage_events.c.id.desc()).limit(SAMPLE_EVENTS)
            for payload in connection.execution_options(yield_per=100).execute(newest).scalars():
                text = self.text(payload)
                texts.append(text)
                size += len(text)
                if size >= SAMPLE_BYTES:
                    break
        return texts

    def add(self, dictionary: Dictionary) -> Dictionary:
        """Store `dictionary` unless one with its id is stored already (another writer trained on the
        same events); the one stored under that id."""
        if self.writing is None:
            raise RuntimeError("a read-only store's dictionaries cannot be trained")
        row = {"id": dictionary.id, "data": dictionary.data, "created_at": datetime.now(timezone.utc)}
        with self.writing() as connection:
            insert = postgresql_insert if connection.dialect.name == "postgresql" else sqlite_insert
            connection.execute(insert(raw_event_dictionaries).values(row).on_conflict_do_nothing(index_elements=["id"]))
        return self.by_id(dictionary.id)

    def recompress(self, dictionary: Dictionary, chunk: int = RECOMPRESS_CHUNK) -> Recompressed:
        """Rewrite every stored raw event not compressed with `dictionary` with it, `chunk` events a
        transaction (ingestion goes on meanwhile: it only adds events). Every event keeps its text."""
        if self.writing is None:
            raise RuntimeError("a read-only store's raw events cannot be rewritten")
        done = Recompressed()
        events = lineage_events.c
        last = 0
        while True:
            with self.writing() as connection:
                rows = connection.execute(
                    select(events.id, events.payload).where(events.id > last).order_by(events.id).limit(chunk)
                ).all()
                if not rows:
                    return done
                last = rows[-1].id
                rewritten = [
                    {"row_id": row.id, "old": bytes(row.payload), "new": compress(self.text(row.payload), dictionary)}
                    for row in rows
                    if dictionary_id(row.payload) != dictionary.id
                ]
                if rewritten:
                    connection.execute(
                        lineage_events.update().where(events.id == bindparam("row_id")).values(payload=bindparam("new")),
                        [{"row_id": row["row_id"], "new": row["new"]} for row in rewritten],
                    )
            done = Recompressed(
                done.events + len(rewritten),
                done.bytes_before + sum(len(row["old"]) for row in rewritten),
                done.bytes_after + sum(len(row["new"]) for row in rewritten),
            )
