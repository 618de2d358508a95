"""Plan capture on real Spark: the files the lineage engine reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.tpcds.capture import capture
from emitter.lineage import write_command
from emitter.plan import parse_plan

pytestmark = pytest.mark.spark


def test_capture_saves_every_ctas_callback_with_an_index_the_engine_can_read(
    tmp_path: Path, tpcds_tables: Path, tpcds_query_texts: dict[str, str]
) -> None:
    plans = tmp_path / "plans"

    records = capture(["q3"], plans, tpcds_tables, tpcds_query_texts, scratch=tmp_path)

    index = json.loads((plans / "index.json").read_text())
    assert [entry["file"] for entry in index] == [record.file for record in records]
    writes = [entry for entry in index if entry["is_write"] and entry["root_class"] == "InsertIntoHadoopFsRelationCommand"]
    assert len(writes) == 1 and writes[0]["name"] == "q03" and not writes[0]["failed"]
    plan_text = (plans / writes[0]["file"]).read_text()
    assert writes[0]["size_bytes"] == len(plan_text.encode())
    command = write_command(parse_plan(plan_text))
    assert command is not None
    assert tuple(command.output_columns) == ("d_year", "brand_id", "brand", "sum_agg")
    assert (plans / "q03.sql").read_text().startswith("CREATE TABLE bench.q03 USING parquet AS")
    assert json.loads((plans / "failures.json").read_text()) == {}
    assert "index.json" in (plans / "README.txt").read_text()
