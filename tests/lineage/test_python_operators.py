"""Python operators that need pandas to capture live (not installed here): built from the captured
BatchEvalPython plan by renaming / reshaping its nodes the way Spark serializes them."""

from __future__ import annotations

import copy
from typing import Any

from emitter.lineage import column_lineage
from emitter.plan import parse_plan
from tests.lineage.helpers import edge_rows, load_case

LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."


def _udf_plan() -> list[dict[str, Any]]:
    plan = copy.deepcopy(load_case("python_udf")["plan"])
    assert [node["class"].rsplit(".", 1)[-1] for node in plan] == [
        "Project", "BatchEvalPython", "Project", "LogicalRelation",
    ]
    return plan


def test_arrow_eval_python_maps_each_result_to_its_udf_inputs() -> None:
    plan = _udf_plan()
    plan[1]["class"] = LOGICAL + "ArrowEvalPython"
    plan[1]["evalType"] = 200
    result = column_lineage(parse_plan(plan))

    assert edge_rows(result.columns["loud"]) == [
        ["default.customers", "name", "DIRECT", "TRANSFORMATION", "shout(name)", False]
    ]
    assert result.warnings == ()


def test_map_in_pandas_output_depends_on_every_input_column() -> None:
    plan = _udf_plan()
    batch_eval = plan[1]
    udf_tree = batch_eval["udfs"][0]
    result_attribute = batch_eval["resultAttrs"][0]
    map_in_pandas = {
        "class": "org.apache.spark.sql.catalyst.plans.logical.MapInPandas",
        "num-children": 1,
        "functionExpr": udf_tree,
        "output": [result_attribute],
        "child": 0,
        "isBarrier": False,
    }
    source_project = plan[2]
    input_names = [item[0]["name"] for item in source_project["projectList"]]
    result = column_lineage(parse_plan([map_in_pandas, *plan[2:]]))

    [column] = result.columns
    assert column == "pythonUDF0"
    rows = edge_rows(result.columns[column])
    assert [row[1] for row in rows] == sorted(input_names)
    assert {tuple(row[2:5]) for row in rows} == {("DIRECT", "TRANSFORMATION", "shout(name)")}
    assert result.warnings == ()
