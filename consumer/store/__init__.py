"""The one interface the write side (ingest) and the read side (query/api) meet at.

`open_store(url)` gives a migrated `Store` on SQLite (`sqlite:///path.db`) or PostgreSQL
(`postgresql://...`); `store.engine` is a plain SQLAlchemy engine for readers, the tables are
in `consumer.store.schema`."""

from __future__ import annotations

from consumer.store.store import Store, StoreUnavailable, open_store

__all__ = ["Store", "StoreUnavailable", "open_store"]
