"""Hive tables (a Hive-enabled session: Spark's Hive classes, a Derby metastore of its own) under
`python -m emitter run`: reads of a `HiveTableRelation`, and the Hive write commands, are named
as the catalog tables they are."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest

from tests.support.spark import SPARK_TEST_CONF, read_events, run_under_emitter
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

HIVE_SCRIPT = """
import sys
from pyspark.sql import SparkSession

builder = SparkSession.builder.master("local[2]").appName("hive tables").enableHiveSupport()
for key, value in {conf!r}.items():
    builder = builder.config(key, value)
spark = builder.config("spark.sql.warehouse.dir", sys.argv[1]).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
spark.sql("CREATE TABLE hive_source (id BIGINT, label STRING) STORED AS TEXTFILE")
spark.sql("INSERT INTO hive_source SELECT id, CAST(id AS STRING) FROM range(3)")
spark.sql("CREATE TABLE hive_copy STORED AS TEXTFILE AS SELECT id, upper(label) AS shout FROM hive_source")
spark.stop()
"""


def _pyspark_version() -> str:
    try:
        return version("pyspark")
    except PackageNotFoundError:
        return ""


@pytest.fixture(scope="module")
def completes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The script's COMPLETE events with outputs, by job name without the application's prefix."""
    tmp_path = tmp_path_factory.mktemp("hive")
    script = tmp_path / "hive_tables.py"
    script.write_text(HIVE_SCRIPT.format(conf=SPARK_TEST_CONF))
    events_path = tmp_path / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(tmp_path / "warehouse"),))
    assert result.returncode == 0, result.stderr[-4000:]
    events = read_events(events_path)
    for event in events:
        assert_valid_event(event)
    return {e["job"]["name"].split(".", 1)[1]: e for e in events if e["eventType"] == "COMPLETE" and e["outputs"]}


def _table_of(dataset: dict[str, Any]) -> str:
    symlinks = dataset["facets"].get("symlinks")
    return symlinks["identifiers"][0]["name"] if symlinks else dataset["name"]


def test_hive_table_reads_and_writes_are_named_by_their_tables(completes: dict[str, dict[str, Any]]) -> None:
    [written] = completes["insert_into_hive_table.default_hive_source"]["outputs"]
    assert _table_of(written) == "default.hive_source"
    assert written["name"].endswith("/warehouse/hive_source")
    assert "create_hive_table_as_select_command.default_hive_copy" in completes
    # the CTAS's run (on Spark 3.5 its nested insert's, see below) reads the HiveTableRelation
    [ctas] = [run for run in completes.values() if run["inputs"]]
    [source] = ctas["inputs"]
    assert (source["namespace"], source["name"]) == (written["namespace"], written["name"])
    assert _table_of(source) == "default.hive_source"
    [copy] = ctas["outputs"]
    assert _table_of(copy) == "default.hive_copy"
    assert [f["name"] for f in copy["facets"]["schema"]["fields"]] == ["id", "shout"]
    assert copy["outputFacets"]["outputStatistics"]["rowCount"] == 3


@pytest.mark.xfail(
    condition=_pyspark_version().startswith("3."),
    reason=(
        "Spark 3.5: a Hive CTAS's nested InsertIntoHiveTable is merged into its wrapper only when the listener"
        " tagging executions reads the nested one before it ends, a race the listener bus decides (else a run of its own)"
    ),
    strict=False,
)
def test_one_run_per_hive_write(completes: dict[str, dict[str, Any]]) -> None:
    assert set(completes) == {
        "insert_into_hive_table.default_hive_source",
        "create_hive_table_as_select_command.default_hive_copy",
    }
