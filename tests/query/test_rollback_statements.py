"""The correction plan's rollback statements, from what a dataset's events said of it: the
snapshot's kind, and its `storage`, `catalog` and `symlinks` facets."""

from __future__ import annotations

from consumer.query.rollback import rollback_statement

ICEBERG_FACETS = {
    "catalog": {"framework": "iceberg", "type": "hadoop", "name": "lake"},
    "symlinks": {"identifiers": [{"namespace": "file:/warehouse", "name": "db.orders", "type": "TABLE"}]},
}


def test_an_iceberg_table_rolls_back_in_the_catalog_its_events_named() -> None:
    statement = rollback_statement("file", "/lake/db/orders", "8744", "iceberg", ICEBERG_FACETS)
    assert statement == "CALL lake.system.rollback_to_snapshot('db.orders', 8744)"


def test_an_iceberg_table_without_its_catalog_gets_no_statement() -> None:
    assert rollback_statement("file", "/lake/db/orders", "8744", "iceberg", {"symlinks": ICEBERG_FACETS["symlinks"]}) is None
    assert rollback_statement("file", "/lake/db/orders", "8744", "iceberg", {"catalog": ICEBERG_FACETS["catalog"]}) is None


def test_a_delta_table_is_restored_by_its_location() -> None:
    assert rollback_statement("file", "/lake/events", "3", "delta", {}) == "RESTORE TABLE delta.`/lake/events` TO VERSION AS OF 3"
    assert (
        rollback_statement("s3://bucket", "lake/events", "3", None, {"storage": {"storageLayer": "delta"}})
        == "RESTORE TABLE delta.`s3://bucket/lake/events` TO VERSION AS OF 3"
    )


def test_names_that_need_quoting_are_quoted() -> None:
    facets = {
        "catalog": {"name": "my-lake"},
        "symlinks": {"identifiers": [{"name": "db.o'brien", "type": "TABLE"}]},
    }
    assert (
        rollback_statement("file", "/x", "1", "iceberg", facets) == "CALL `my-lake`.system.rollback_to_snapshot('db.o''brien', 1)"
    )
    assert rollback_statement("file", "/a`b", "2", "delta", {}) == "RESTORE TABLE delta.`/a``b` TO VERSION AS OF 2"


def test_other_tables_and_snapshots_that_are_no_version_number_get_none() -> None:
    assert rollback_statement("file", "/lake/silver", "s1", "content", {}) is None
    assert rollback_statement("file", "/lake/events", "abc", "delta", {}) is None
    assert rollback_statement("file", "/lake/events", None, "delta", {}) is None
