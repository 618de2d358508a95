"""Write commands at the root of a captured plan: target and the query they write."""

from __future__ import annotations

from emitter.lineage import write_command
from emitter.plan import parse_plan
from tests.lineage.helpers import load_case


def test_insert_into_names_target_columns_and_table() -> None:
    command = write_command(parse_plan(load_case("write_insert_into")["plan"]))
    assert command is not None
    assert command.kind == "InsertIntoHadoopFsRelationCommand"
    assert command.table == "default.target_customers"
    assert command.output_columns == ("customer_name", "company")
    assert command.partition_columns == ()
    assert command.format == "parquet"
    assert command.query.cls == "Project", "WriteFiles is stripped"


def test_ctas_query_comes_from_the_query_field() -> None:
    command = write_command(parse_plan(load_case("write_ctas")["plan"]))
    assert command is not None
    assert command.kind == "CreateDataSourceTableAsSelectCommand"
    assert command.table == "default.ctas_out"
    assert command.output_columns == ("name", "double_age")
    assert [attr.name for attr in command.query.output] == ["name", "double_age"]


def test_partitioned_write_drops_the_planned_partition_sort() -> None:
    command = write_command(parse_plan(load_case("write_partitioned_insert")["plan"]))
    assert command is not None
    assert command.partition_columns == ("day",)
    assert command.output_columns == ("region", "product", "amount", "day")
    assert command.query.cls == "Project"
    assert command.mode is None, "INSERT OVERWRITE's SaveMode is not in the JSON: py4j fills it"


def test_a_query_root_is_not_a_write() -> None:
    assert write_command(parse_plan(load_case("join_filter")["plan"])) is None


def test_v2_append_reads_its_query_from_the_child() -> None:
    command = write_command(parse_plan(load_case("write_v2_noop")["plan"]))
    assert command is not None
    assert command.kind == "AppendData"
    assert command.mode == "append"
    assert command.output_columns == ("name",)
    assert command.query.cls == "Project"


def test_dataframe_path_write_has_no_table_and_partition_columns() -> None:
    command = write_command(parse_plan(load_case("write_dataframe_partitioned_path")["plan"]))
    assert command is not None
    assert command.table is None
    assert command.partition_columns == ("company_id",)
    assert command.output_columns == ("name", "year", "company_id")
    assert command.query.cls == "Project", "the planned partition Sort is not the user's"


def test_output_column_names_split_on_top_level_commas_only() -> None:
    from emitter.lineage.writes import _split_names

    assert _split_names("a, round((x / y), 2), CAST(b AS DECIMAL(15,4))") == (
        "a",
        "round((x / y), 2)",
        "CAST(b AS DECIMAL(15,4))",
    )
