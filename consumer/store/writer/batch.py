"""The batch context every table family's writes share: the transaction's connection and dialect,
its bulk statements (`many`), its locks and memory, and the keyed reads and upserts by natural key
(each a fixed number of set-based statements per table, whatever the number of rows)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Table, and_, select, text
from sqlalchemy.dialects import postgresql, sqlite

from consumer import json_codec
from consumer.store.bulk import execute_many
from consumer.store.rows import CONTENTS_LOCK, FACET, Merged, VersionContent, keeps_stored_facets, stamp
from consumer.store.schema import chunks

BATCH_WORK_MEM = "64MB"


class Batch:
    """One batch's writes in the caller's transaction."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.dialect = connection.dialect.name
        self.insert: Callable[[Table], Any] = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        self.now = datetime.now(timezone.utc)
        # The content of each job version this batch looked up or wrote, by id: the current
        # lineage written after it need not read back what was just hashed.
        self.version_content: dict[int, VersionContent] = {}

    def many(self, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        execute_many(self.connection, statement, rows)

    def size_memory(self) -> None:
        """PostgreSQL: room for a batch's column arrays (a batch of events is megabytes of text),
        which otherwise spill to temporary files while unnest reads them; this transaction only."""
        if self.dialect == "postgresql":
            self.connection.execute(text(f"SET LOCAL work_mem = '{BATCH_WORK_MEM}'"))

    def lock_keys(self, lock_ids: Sequence[int]) -> None:
        """PostgreSQL: transaction advisory locks on every job, dataset and run of the batch, in
        ascending lock-id order (the one global order all writers share), and the version
        contents' lock shared (rows.CONTENTS_LOCK). SQLite has one writer."""
        if self.dialect != "postgresql":
            return
        self.connection.execute(text("SELECT pg_advisory_xact_lock_shared(:contents)"), {"contents": CONTENTS_LOCK})
        if not lock_ids:
            return
        self.connection.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(id)) FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id ORDER BY 1) AS ordered"
            ),
            {"ids": sorted(lock_ids)},
        )

    # keyed reads and writes --------------------------------------------------------------
    def select_ids(self, table: Table, key_columns: list[Any], keys: Sequence[Any]) -> dict[Any, int]:
        columns = [table.c.id, *key_columns]
        return {key: row["id"] for key, row in self.existing(table, key_columns, keys, columns).items()}

    def existing(
        self, table: Table, key_columns: list[Any], keys: Sequence[Any], columns: Sequence[Any] | None = None
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows (`columns`, default all) by natural key."""
        found: dict[Any, dict[str, Any]] = {}
        wanted = set(keys)
        for chunk in chunks(sorted(wanted)):
            query = select(*columns) if columns is not None else select(table)
            if len(key_columns) == 1:
                query = query.where(key_columns[0].in_(chunk))
            elif self.dialect == "sqlite":
                ids = self._sqlite_ids(table, key_columns, chunk)
                if columns is not None and list(columns) == [table.c.id, *key_columns]:
                    names = [c.name for c in key_columns]
                    found.update((key, {"id": id_, **dict(zip(names, key, strict=True))}) for key, id_ in ids.items())
                    continue
                query = query.where(table.c.id.in_(sorted(ids.values())))
            else:
                # PostgreSQL plans row-value IN lists poorly: one IN list per column, filtered here
                query = query.where(and_(*(c.in_(sorted({key[i] for key in chunk})) for i, c in enumerate(key_columns))))
            for row in self.connection.execute(query).mappings():
                key = row[key_columns[0].name] if len(key_columns) == 1 else tuple(row[c.name] for c in key_columns)
                if key in wanted:
                    found[key] = dict(row)
        return found

    def _sqlite_ids(self, table: Table, key_columns: list[Any], keys: Sequence[tuple[Any, ...]]) -> dict[Any, int]:
        """SQLite: ids by key of several columns (integers and strings), the keys joined from a
        VALUES list: one probe of the unique index per key, where `a IN (..) AND b IN (..)` probes
        every pair of the two lists. Plain SQL: building the same as a SQLAlchemy construct of
        hundreds of rows costs many times what running it does."""
        names = [column.name for column in key_columns]
        listed = ", ".join(["(" + ", ".join("?" * len(names)) + ")"] * len(keys))
        selected = ", ".join(f"stored.{name}" for name in names)
        joined = " AND ".join(f"stored.{name} = wanted.{name}" for name in names)
        # the names are the schema's; every value is bound
        statement = f"WITH wanted ({', '.join(names)}) AS (VALUES {listed}) SELECT stored.id, {selected} FROM wanted JOIN {table.name} AS stored ON {joined}"  # noqa: S608
        rows = self.connection.exec_driver_sql(statement, tuple(value for key in keys for value in key))
        return {tuple(stored_key): id_ for id_, *stored_key in rows}

    def stored_for_merge(
        self,
        table: Table,
        key_columns: list[Any],
        incoming: Mapping[Any, Merged],
        found: dict[Any, dict[str, Any]] | None = None,
    ) -> dict[Any, dict[str, Any]]:
        """Stored rows by natural key (those `found` already, if given), to merge the batch's
        `incoming` values per key into. A row's facets (large JSON: schemas, column lineage) are
        read only where one of its stored facets outlives the batch; where the batch carries a
        newer value of every one, the merge needs none of them."""
        if found is None:
            found = self.existing(table, key_columns, list(incoming), without_facets(table))
        kept = sorted(row["id"] for key, row in found.items() if keeps_stored_facets(row["merged_at"], incoming[key]))
        facets: dict[int, Any] = {}
        for chunk in chunks(kept):
            facets.update(self.connection.execute(select(table.c.id, table.c.facets).where(table.c.id.in_(chunk))).all())
        for row in found.values():
            row["facets"] = facets.get(row["id"])
        return found

    def upsert(self, table: Table, key_names: list[str], values: list[dict[str, Any]]) -> dict[Any, int]:
        """Insert or overwrite `values` (already merged with what was stored), in key order; ids by natural key."""
        if not values:
            return {}
        values = sorted(values, key=lambda v: tuple(v[name] for name in key_names))
        statement = self.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=key_names,
            set_={name: statement.excluded[name] for name in values[0] if name not in key_names},
        )
        self.many(statement, values)
        key_columns = [table.c[name] for name in key_names]
        keys = [tuple(v[name] for name in key_names) if len(key_names) > 1 else v[key_names[0]] for v in values]
        return self.select_ids(table, key_columns, keys)

    def ids_inserting_missing(
        self, table: Table, key_names: list[str], keys: Iterable[Any], row_of: Callable[[Any], dict[str, Any]]
    ) -> dict[Any, int]:
        """Ids of content-addressed rows by natural key, inserting (as `row_of(key)`) only those not
        stored yet: a known row costs one keyed lookup and is never written again."""
        key_columns = [table.c[name] for name in key_names]
        wanted = set(keys)
        ids = self.select_ids(table, key_columns, sorted(wanted))
        missing = sorted(wanted - set(ids))
        if missing:
            statement = self.insert(table).on_conflict_do_nothing(index_elements=key_names)
            self.many(statement, [row_of(key) for key in missing])
            ids.update(self.select_ids(table, key_columns, missing))
        return ids


def merged_with_stored(row: Mapping[str, Any] | None, columns: Sequence[str], incoming: Merged) -> Merged:
    """A stored row's merged values and facets (its facets only if they were read), with the
    batch's (`incoming`) merged in after them."""
    if row is None:
        return incoming
    values = {column: row[column] for column in columns}
    facets = json_codec.encode_members(row["facets"] or {})
    times = row.get("merged_at")
    if times is None:  # written before merged_at existed: everything as of its last update
        at = stamp(row["updated_at"])
        times = {key: at for key, value in values.items() if value is not None}
        times.update({f"{FACET}{key}": at for key in facets})
    merged = Merged(values, facets, times)
    merged.absorb(incoming)
    return merged


def without_facets(table: Table) -> list[Any]:
    return [column for column in table.c if column.name != "facets"]
