"""Events from a real PySpark pipeline run under the emitter, ingested by the consumer, answered by the
query layer: table, column and snapshot lineage of what Spark actually did."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from consumer.query import lineage_store as ls
from consumer.query import marquez as mq
from tests.query.pipeline import ingest
from tests.support.spark import read_events, run_under_emitter, script_prelude
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

PIPELINE = """
import sys
from pyspark.sql import functions as F
base = sys.argv[1]
for batch in (1, 2):
    spark.createDataFrame([(batch * 10 + i, "FR" if i % 2 else "NO", float(i)) for i in range(4)],
                          "id long, country string, amount double").write.mode("append").parquet(f"{base}/src")
    src = spark.read.parquet(f"{base}/src")
    src.where("amount > 0").select("id", "country", (F.col("amount") * 100).alias("cents")) \\
        .write.mode("overwrite").parquet(f"{base}/silver")
    spark.read.parquet(f"{base}/silver").groupBy("country").agg(F.sum("cents").alias("total")) \\
        .write.mode("overwrite").parquet(f"{base}/gold")
"""


@pytest.fixture(scope="module")
def spark_events(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path]:
    tmp = tmp_path_factory.mktemp("query-e2e")
    script = tmp / "pipeline.py"
    script.write_text(script_prelude("query e2e", tmp / "warehouse") + textwrap.dedent(PIPELINE))
    events_path = tmp / "events.jsonl"
    result = run_under_emitter(script, events_path, args=(str(tmp / "data"),))
    assert result.returncode == 0, result.stderr[-3000:]
    return read_events(events_path), tmp / "data"


def test_spark_pipeline_lineage_is_answered(sqlite_store, spark_events):
    produced, data = spark_events
    for event in produced:
        assert_valid_event(event)
    ingest(sqlite_store, produced)
    gold, silver, src = f"file:{data / 'gold'}", f"file:{data / 'silver'}", f"file:{data / 'src'}"

    upstream = ls.table_lineage(sqlite_store, gold, "upstream", 10)
    assert [(t["name"], t["distance"]) for t in upstream["tables"]] == [(str(data / "silver"), 1), (str(data / "src"), 2)]

    total = ls.column_lineage(sqlite_store, gold, "total", "upstream", 10, direct_only=True)
    steps = {(e["from"]["field"], e["to"]["field"], e["transformation"]["subtype"]) for e in total["edges"]}
    assert ("cents", "total", "AGGREGATION") in steps and ("amount", "cents", "TRANSFORMATION") in steps
    assert all(e["transformation"]["type"] == "DIRECT" for e in total["edges"])
    indirect = ls.column_lineage(sqlite_store, silver, "id", "upstream", 10, direct_only=False)
    filters = {(i["from"]["field"], i["transformation"]["subtype"]) for i in indirect["tableLevelInputs"]}
    assert ("amount", "FILTER") in filters  # where amount > 0 shapes every column of silver

    versions = mq.list_dataset_versions(sqlite_store, "file", str(data / "gold"), 10, 0)["versions"]
    assert len(versions) == 2  # one snapshot per batch
    newest = ls.snapshot_lineage(sqlite_store, gold, versions[0]["version"], "upstream", 10)
    sources = {(x["from"]["name"], x["to"]["name"]) for x in newest["steps"]}
    assert sources == {(str(data / "silver"), str(data / "gold")), (str(data / "src"), str(data / "silver"))}
    first_src = ls.snapshot_lineage(sqlite_store, gold, versions[1]["version"], "upstream", 10)["steps"]
    src_snapshots = {x["from"]["snapshot"] for x in newest["steps"] + first_src if x["from"]["name"] == str(data / "src")}
    assert len(src_snapshots) == 2  # the appended source changed between the batches
    plan = ls.correction_plan(sqlite_store, src, next(iter(src_snapshots)))
    assert {t["name"] for t in plan["tables"]} == {str(data / "silver"), str(data / "gold")}
