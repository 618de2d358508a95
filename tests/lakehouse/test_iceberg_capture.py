"""The pure side of Iceberg's snapshots (no Spark here): what the Java helpers' JSON becomes, which
snapshot each relation gets from Iceberg's scan and commit events, and a V2 CTAS as one run.
The same paths run live in test_iceberg_live.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from emitter import described, table_events
from emitter.capture import Capture, RelationInfo, TableRef, WriteInfo
from emitter.dedupe import WrapperDedupe
from emitter.snapshots import Snapshot

LOCATION = "file:/lake/db/events"


def _iceberg(name: str = "lake.db.events", version: str = "3") -> RelationInfo:
    return RelationInfo(
        "DataSourceV2ScanRelation",
        table=TableRef("events", "db", "lake"),
        table_location=LOCATION,
        format="iceberg",
        table_version=("iceberg", version),
        v2_name=name,
    )


def _events(*events: tuple[str, str, str]) -> tuple[table_events.TableEvent, ...]:
    return tuple(table_events.TableEvent(kind, table, snapshot) for kind, table, snapshot in events)


def test_the_action_header_carries_icebergs_events() -> None:
    header = {
        "root": "AppendData",
        "id": 4,
        "write": None,
        "tableEvents": [
            {"event": "scan", "table": "lake.db.events", "snapshot": "3"},
            {"event": "commit", "table": "lake.db.out", "snapshot": "9", "partitions": [{"day": "2024-01-02"}, {"day": None}]},
        ],
    }
    action = described.parse_described_action(json.dumps(header))
    assert action.table_events == (
        table_events.TableEvent("scan", "lake.db.events", "3"),
        table_events.TableEvent("commit", "lake.db.out", "9", ({"day": None}, {"day": "2024-01-02"})),
    )
    assert described.parse_described_action(json.dumps({"root": "Project", "id": 5})).table_events == ()


def test_a_relation_is_versioned_by_the_one_snapshot_its_scans_read() -> None:
    leaves = {1: _iceberg(version="7"), 2: RelationInfo("LogicalRelation", paths=("file:/in",))}
    scanned = table_events.with_scanned_versions(
        leaves, _events(("scan", "lake.db.events", "3"), ("commit", "lake.db.events", "7"))
    )
    assert scanned[1].table_version == ("iceberg", "3")  # not the table's snapshot when the listener looked
    assert scanned[2] == leaves[2]
    across_time = _events(("scan", "lake.db.events", "3"), ("scan", "lake.db.events", "5"))
    assert table_events.with_scanned_versions(leaves, across_time) == leaves  # each leaf keeps its own (pinned) one
    assert table_events.with_scanned_versions(leaves, _events(("scan", "lake.db.other", "3"))) == leaves


def test_a_table_the_action_committed_to_without_scanning_it_was_read_at_the_commits_parent() -> None:
    """A DELETE run on metadata alone plans no scan: its relation shows the snapshot the action itself
    committed (the table's current one when the listener looks), so it read that commit's parent."""
    header = {
        "root": "DeleteFromTableWithFilters",
        "id": 6,
        "write": None,
        "tableEvents": [{"event": "commit", "table": "lake.db.events", "snapshot": "8", "parent": "7", "partitions": []}],
    }
    [commit] = described.parse_described_action(json.dumps(header)).table_events
    assert commit == table_events.TableEvent("commit", "lake.db.events", "8", (), parent_id="7")
    leaves = {1: _iceberg(version="8")}
    assert table_events.with_scanned_versions(leaves, (commit,))[1].table_version == ("iceberg", "7")
    pinned = {1: _iceberg(version="5")}  # a relation pinned to another snapshot keeps it
    assert table_events.with_scanned_versions(pinned, (commit,)) == pinned
    scanned = table_events.with_scanned_versions(leaves, (commit, *_events(("scan", "lake.db.events", "6"))))
    assert scanned[1].table_version == ("iceberg", "6")  # a scan says what was read
    first = table_events.TableEvent("commit", "lake.db.events", "8", ())  # a table's first snapshot has no parent
    assert table_events.with_scanned_versions(leaves, (first,)) == leaves


def test_a_write_reports_the_snapshot_its_commit_made() -> None:
    commits = (
        table_events.TableEvent("commit", "lake.db.events", "8", ({"day": "2024-01-02"},)),
        table_events.TableEvent("commit", "lake.db.other", "9", ()),
    )
    assert table_events.committed_snapshot(_iceberg(), commits) == Snapshot("8", "iceberg", partitions=({"day": "2024-01-02"},))
    assert table_events.committed_snapshot(_iceberg(), _events(("scan", "lake.db.events", "8"))) is None
    not_iceberg = RelationInfo("AppendData", table=TableRef("t"), format="jdbc", v2_name="lake.db.events")
    assert table_events.committed_snapshot(not_iceberg, commits) is None


def test_a_snapshot_selector_is_no_part_of_the_table_name() -> None:
    assert table_events.iceberg_table_identifier("snapshot_id_42", ("db", "t")) == ("t", ("db",))
    assert table_events.iceberg_table_identifier("at_timestamp_1700000000000", ("db", "t")) == ("t", ("db",))
    assert table_events.iceberg_table_identifier("branch_audit", ("db", "t")) == ("t", ("db",))
    assert table_events.iceberg_table_identifier("snapshot_id_42", ()) == ("snapshot_id_42", ())
    assert table_events.iceberg_table_identifier("t", ("db",)) == ("t", ("db",))
    relation = described.described_relation(
        {
            "class": "DataSourceV2Relation",
            "key": 1,
            "v2": {
                "name": "lake.db.t",
                "properties": {"provider": "iceberg", "location": LOCATION},
                "identifier": {"name": "snapshot_id_42", "namespace": ["db", "t"]},
                "catalog": "lake",
                "pinnedSnapshot": "42",
                "partitionColumns": ["ts_day"],
                "pushedFilters": [{"description": "region = 'eu'", "columns": ["region"]}],
            },
        }
    )
    assert relation is not None and relation.table == TableRef("t", "db", "lake")
    assert (relation.table_version, relation.partition_columns, relation.v2_name) == (("iceberg", "42"), ("ts_day",), "lake.db.t")
    assert [(f.description, f.columns) for f in relation.pushed_filters] == [("region = 'eu'", ("region",))]


def test_an_atomic_ctas_is_one_run_named_by_the_ctas() -> None:
    end = datetime(2026, 1, 1, tzinfo=timezone.utc)
    staged = RelationInfo("AppendData", table=TableRef("out", "db", "lake"), table_location="file:/lake/db/out", format="iceberg")
    nested = Capture(
        "command", 12, end, 0, "[]", write=WriteInfo("AppendData", staged, "Append", ("id",), into_staged_table=True)
    )
    created = RelationInfo("CreateTableAsSelect", table=TableRef("out", "db", "lake"))
    wrapper = Capture("command", 11, end, 0, "", write=WriteInfo("CreateTableAsSelect", created, "ErrorIfExists", ("id",)))
    dedupe = WrapperDedupe()
    assert dedupe.accept(nested) == []  # held: a write into a staged table is a CTAS's, whatever Spark says of it
    assert dedupe.merges("CreateTableAsSelect", 11, created)
    [merged] = dedupe.accept(wrapper)
    assert merged.write is not None
    assert (merged.write.command, merged.write.mode) == ("CreateTableAsSelect", "ErrorIfExists")
    assert merged.write.target.table_location == "file:/lake/db/out"  # the staged table's location, kept
