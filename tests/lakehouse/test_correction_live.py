"""The correction plan, executed: a three-step pipeline (source → bronze → silver → gold) on real
Iceberg and Delta tables runs twice, the second time on a bad snapshot of its source. The events
the emitter wrote go through the consumer's ingestion route into a store; the API and the CLI are
asked for the plan of the bad snapshot, and the statements they return, run in Spark, put every
table back at the snapshot written before the bad data reached it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from consumer.query import cli as query_cli
from tests.support.consumer_api import api_after_ingesting
from tests.support.delta import DeltaSession
from tests.support.iceberg import CATALOG, JDBC_CATALOG, IcebergSession, require_jdbc_catalog
from tests.support.lakehouse import completed_writes
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

STEPS = ("bronze", "silver", "gold")
GOOD_ROWS, BAD_ROWS = [(1, 10), (2, 20)], [(3, -999)]


# in the child ----------------------------------------------------------------------------
def _sql(spark: Any, *statements: str) -> None:
    for statement in statements:
        spark.sql(statement)


def _iceberg_pipeline(spark: Any, prefix: str) -> None:
    """Source snapshot 1 (good), the three steps; source snapshot 2 (bad), the three steps again.
    Bronze and silver are overwritten; gold is merged into (its new snapshot also derives from its
    previous one)."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {prefix.rsplit('.', 2)[0]}.db")
    spark.sql(f"CREATE TABLE {prefix}source (id bigint, v bigint) USING iceberg")
    for table in STEPS:
        spark.sql(f"CREATE TABLE {prefix}{table} (id bigint, v bigint) USING iceberg")
    for rows in (GOOD_ROWS, BAD_ROWS):
        spark.sql(f"INSERT INTO {prefix}source VALUES {', '.join(map(str, rows))}")
        spark.sql(f"INSERT OVERWRITE {prefix}bronze SELECT id, v + 1 AS v FROM {prefix}source")
        spark.sql(f"INSERT OVERWRITE {prefix}silver SELECT id, v + 1 AS v FROM {prefix}bronze")
        spark.sql(
            f"MERGE INTO {prefix}gold t USING (SELECT id, v + 1 AS v FROM {prefix}silver) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
        )


def _delta_pipeline(spark: Any, root: str) -> None:
    """The same on Delta path tables: of source, bronze and silver version 0 from good data and 1
    from bad; gold, created empty (version 0), is merged into: version 1 good, 2 bad."""
    spark.sql(f"CREATE TABLE delta.`{root}/gold` (id bigint, v bigint) USING delta")
    for version, rows in enumerate((GOOD_ROWS, BAD_ROWS)):
        frame = spark.createDataFrame(rows, "id bigint, v bigint")
        frame.write.format("delta").mode("append" if version else "error").save(f"{root}/source")
        for read, written in (("source", "bronze"), ("bronze", "silver")):
            step = spark.read.format("delta").load(f"{root}/{read}").selectExpr("id", "v + 1 AS v")
            step.write.format("delta").mode("overwrite").save(f"{root}/{written}")
        spark.sql(
            f"MERGE INTO delta.`{root}/gold` t USING (SELECT id, v + 1 AS v FROM delta.`{root}/silver`) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
        )


# in the test -----------------------------------------------------------------------------
def _plan_from_api_and_cli(
    store: Any, events: list[dict[str, Any]], table: str, snapshot: str
) -> tuple[dict[str, Any], list[str]]:
    """The consumer's plan for (`table`, `snapshot`) after ingesting `events` over HTTP: the API's
    answer, and the statements the CLI prints."""
    with api_after_ingesting(store, events) as client:
        answer = client.get("/api/v1/lineage-store/correction-plan", params={"table": table, "snapshot": snapshot})
        assert answer.status_code == 200, answer.text
    out = io.StringIO()
    assert query_cli.main(["correction-plan", table, snapshot], store, out) == 0
    printed = out.getvalue().split("roll back with (Spark SQL):\n", 1)[1]
    return answer.json(), [line.strip().removesuffix(";") for line in printed.splitlines() if line.strip()]


def _statements(plan: dict[str, Any]) -> list[str]:
    return [plan["rollBackTableStatement"], *(table["rollBackStatement"] for table in plan["tables"])]


def _check_plan(plan: dict[str, Any], names: dict[str, str], good: dict[str, str], bad: dict[str, str]) -> None:
    """Every step's table is affected; each rolls back to its good snapshot, derived from the bad one."""
    assert plan["rollBackTableTo"] == good["source"]
    assert {t["name"]: (t["derivedSnapshots"], t["rollBackTo"]) for t in plan["tables"]} == {
        names[step]: ([bad[step]], good[step]) for step in STEPS
    }


def _paimon_snapshots(store: Any, side: str, table: str) -> set[str]:
    """The snapshots of `db.<table>` in the store's Paimon view `<side>_snapshot_lineage`."""
    view = text(f'SELECT snapshot_id FROM {side}_snapshot_lineage WHERE "database" = :db AND "table" = :t')
    with store.engine.connect() as connection:
        return {row[0] for row in connection.execute(view, {"db": "db", "t": table})}


def _run_and_check(session: Any, statements: list[str], current: Callable[[str], str], good: dict[str, str]) -> None:
    session.call(_sql, *statements)
    assert {table: current(table) for table in ("source", *STEPS)} == good


@pytest.mark.parametrize(("catalog", "catalog_type"), [(CATALOG, "hadoop"), (JDBC_CATALOG, "jdbc")])
def test_an_iceberg_pipeline_rolls_back_with_the_statements_of_the_plan(
    iceberg: IcebergSession, sqlite_store: Any, catalog: str, catalog_type: str
) -> None:
    if catalog == JDBC_CATALOG:
        require_jdbc_catalog(iceberg)
    prefix = f"{catalog}.db.correction_"
    iceberg.call(_iceberg_pipeline, prefix)
    snapshots = {table: [s["snapshot_id"] for s in iceberg.snapshots(prefix + table)] for table in ("source", *STEPS)}
    good = {table: str(ids[0]) for table, ids in snapshots.items()}
    bad = {table: str(ids[-1]) for table, ids in snapshots.items()}
    names = {table: str(iceberg.location(prefix + table)) for table in ("source", *STEPS)}

    root = str(iceberg.location(f"{catalog}.db"))
    events = [e for e in iceberg.events() if any(d["name"].startswith(root) for d in e["inputs"] + e["outputs"])]
    [gold_write, *_] = [event for event in completed_writes(events) if event["outputs"][0]["name"] == names["gold"]]
    assert_valid_event(gold_write)
    facets = gold_write["outputs"][0]["facets"]
    assert {key: facets["catalog"][key] for key in ("framework", "type", "name")} == {
        "framework": "iceberg",
        "type": catalog_type,
        "name": catalog,
    }
    assert "password" not in str(gold_write)
    assert facets["storage"]["storageLayer"] == "iceberg"

    plan, printed = _plan_from_api_and_cli(sqlite_store, events, f"file:{names['source']}", bad["source"])
    _check_plan(plan, names, good, bad)
    assert _statements(plan) == printed
    assert printed[0] == f"CALL {catalog}.system.rollback_to_snapshot('db.correction_source', {good['source']})"
    assert _paimon_snapshots(sqlite_store, "sink", "correction_gold") == {good["gold"], bad["gold"]}
    assert good["gold"] in _paimon_snapshots(sqlite_store, "source", "correction_gold")  # the merge read gold too

    def current(table: str) -> str:
        [main] = iceberg.sql(f"SELECT snapshot_id FROM {prefix}{table}.refs WHERE name = 'main'")
        return str(main["snapshot_id"])

    _run_and_check(iceberg, printed, current, good)
    assert iceberg.sql(f"SELECT id, v FROM {prefix}gold ORDER BY id") == [{"id": 1, "v": 13}, {"id": 2, "v": 23}]


def test_a_delta_pipeline_rolls_back_with_the_statements_of_the_plan(delta: DeltaSession, sqlite_store: Any) -> None:
    root = str(delta.work / "correction")
    delta.call(_delta_pipeline, root)
    names = {table: f"{root}/{table}" for table in ("source", *STEPS)}
    good = {**dict.fromkeys(names, "0"), "gold": "1"}
    bad = {**dict.fromkeys(names, "1"), "gold": "2"}

    plan, printed = _plan_from_api_and_cli(sqlite_store, delta.events(), f"file:{names['source']}", "1")
    _check_plan(plan, names, good, bad)
    assert _statements(plan) == printed
    assert printed[0] == f"RESTORE TABLE delta.`{names['source']}` TO VERSION AS OF 0"

    def restored_version(table: str) -> str:
        newest = delta.history(f"delta.`{names[table]}`")[-1]
        assert newest["operation"] == "RESTORE"
        return str(newest["operationParameters"]["version"])

    _run_and_check(delta, printed, restored_version, good)
    assert delta.sql(f"SELECT id, v FROM delta.`{names['gold']}` ORDER BY id") == [{"id": 1, "v": 13}, {"id": 2, "v": 23}]
