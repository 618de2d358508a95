"""CTAS wrapping and query selection (pure)."""

from __future__ import annotations

import pytest

from benchmarks.tpcds.queries import ctas_for, parse_query_list, select_queries


def test_a_two_part_query_becomes_one_ctas_per_statement() -> None:
    text = "SELECT 1 AS a FROM t;\n\nWITH x AS (SELECT 2 AS b) SELECT b FROM x;\n"

    statements = ctas_for("q14", text)

    assert [s.name for s in statements] == ["q14_1", "q14_2"]
    assert [s.query_name for s in statements] == ["q14", "q14"]
    assert statements[1].sql == "CREATE TABLE bench.q14_2 USING parquet AS\nWITH x AS (SELECT 2 AS b) SELECT b FROM x"


def test_a_single_statement_keeps_the_query_name_and_loses_its_semicolon() -> None:
    (statement,) = ctas_for("q03", "SELECT d_year FROM date_dim\nLIMIT 100;\n")

    assert statement.table == "bench.q03"
    assert statement.sql.endswith("LIMIT 100")


def test_only_double_quoted_aliases_ask_for_double_quoted_identifiers() -> None:
    (quoted,) = ctas_for("q50", 'SELECT sum(x) AS "30 days" FROM t')
    (plain,) = ctas_for("q03", "SELECT 'store' AS channel FROM t")

    assert quoted.uses_double_quoted_identifiers
    assert not plain.uses_double_quoted_identifiers


def test_queries_are_selected_by_short_or_padded_names_in_the_given_order() -> None:
    texts = {"q01": "a", "q05": "b", "q14": "c"}

    assert list(select_queries(texts, parse_query_list("q14, 1,q05"))) == ["q14", "q01", "q05"]
    assert select_queries(texts, None) == texts
    with pytest.raises(ValueError, match="q07"):
        select_queries(texts, ["q7"])
