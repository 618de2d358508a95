"""Fixtures shared by the whole suite live in tests/support/, one module per real dependency."""

import os
import sys

import pytest

# Spark starts Python workers (UDFs, foreachBatch functions) with PYSPARK_PYTHON, else the first
# `python3` on PATH: they must run this interpreter, which has the project's dependencies (PySpark 4
# runs Python UDFs through Arrow when pyarrow is installed, and then its workers need pyarrow too).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest_plugins = [
    "tests.support.spec",
    "tests.support.spark",
    "tests.support.iceberg",
    "tests.support.delta",
    "tests.support.kafka_server",
    "tests.support.databases",
    "tests.support.browser",
]

# The files that take minutes each (their durations from `--durations`), longest first. Under
# pytest-xdist a file goes whole to one process, in collection order: these go out first, so the
# short files even out the end instead of one process finishing a long file alone.
LONG_FILES = (
    "tests/lakehouse/test_correction_live.py",  # the PySpark 3.5 pass's longest
    "tests/lakehouse/test_delta_row_level.py",
    "tests/docs/test_quickstart.py",
    "tests/connect/test_connect_server.py",
    "tests/demo/test_demo.py",
    "tests/consumer/test_ingest_processes.py",
    "tests/consumer/test_retention.py",
    "tests/emitter/test_run_script.py",
    "tests/lineage/test_live_spark.py",
    "tests/emitter/test_hive_tables.py",
    "tests/query/test_spark_end_to_end.py",
    "tests/emitter/test_spark_submit.py",
    "tests/transports/test_kafka_transport.py",
    "tests/test_static_checks.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: position for position, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONG_FILES)))
