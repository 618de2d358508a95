"""Which Delta jars the live lakehouse tests run with, and what they do without them (no Spark here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jars
from tests.support import delta


def test_only_spark_35_has_a_delta_set() -> None:
    assert delta.delta_jar_set("3.5") == "delta-spark-3.5"
    assert delta.delta_jar_set("4.3") is None  # no Delta release runs on Spark 4.3 (jars/README.md)


def test_the_spark_35_set_is_delta_spark_and_delta_storage_only() -> None:
    try:
        resolved = jars.classpath("delta-spark-3.5").split(":")
    except jars.JarsUnavailable as error:
        pytest.skip(f"Maven could not resolve here: {error}")
    names = sorted(re.sub(r"-[\d.]+\.jar$", "", Path(jar).name) for jar in resolved)
    assert names == ["delta-spark_2.12", "delta-storage"]  # Spark's own Scala library and ANTLR stay
