"""TPC-DS data at a tiny scale factor in a test-scoped directory, and the suite's spec fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.tpcds import generate

pytest_plugins = ["tests.support.paths", "tests.support.spec"]

TEST_SCALE_FACTOR = 0.01


@pytest.fixture(scope="module")
def tpcds_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate.write_tables(TEST_SCALE_FACTOR, tmp_path_factory.mktemp("tpcds") / "tables")


@pytest.fixture(scope="session")
def tpcds_query_texts() -> dict[str, str]:
    return generate.query_texts()
