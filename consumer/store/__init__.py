"""The one interface the write side (ingest) and the read side (query/api) meet at.

`open_store(url)` gives a migrated `Store` on SQLite (`sqlite:///path.db`) or PostgreSQL
(`postgresql://...`); `store.engine` is a plain SQLAlchemy engine for readers, the tables are
in `consumer.store.schema`. The names below load on first use, so a reader importing
`consumer.store.schema` loads nothing of the writer; the store imports nothing of the write side (consumer.ingest):
it takes the plain rows of consumer.store.rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer.store.store import Store, StoreBusy, StoreUnavailable, open_store

__all__ = ["Store", "StoreBusy", "StoreUnavailable", "open_store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from consumer.store import store

        return getattr(store, name)
    raise AttributeError(f"module 'consumer.store' has no attribute {name!r}")
