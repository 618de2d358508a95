"""Fixtures shared by the whole suite live in tests/support/, one module per real dependency."""

import os
import sys

# Spark starts Python workers (UDFs, foreachBatch functions) with PYSPARK_PYTHON, else the first
# `python3` on PATH: they must run this interpreter, which has the project's dependencies (PySpark 4
# runs Python UDFs through Arrow when pyarrow is installed, and then its workers need pyarrow too).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest_plugins = [
    "tests.support.spec",
    "tests.support.spark",
    "tests.support.broker",
    "tests.support.databases",
    "tests.support.relay",
    "tests.support.browser",
]
