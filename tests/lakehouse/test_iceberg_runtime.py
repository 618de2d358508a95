"""Which Iceberg runtime the live lakehouse tests run with, and what they do without one (no Spark here)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import jars
from tests.support import iceberg

POM_NAMESPACE = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pinned(property_name: str) -> str:
    found = ElementTree.parse(jars.POM).getroot().findtext(f"m:properties/m:{property_name}", namespaces=POM_NAMESPACE)
    assert found, f"jars/pom.xml pins no {property_name}"
    return found


def test_each_spark_version_has_its_own_runtime_set_or_none() -> None:
    assert iceberg.iceberg_jar_set("3.5") == "iceberg-spark-3.5"
    assert iceberg.iceberg_jar_set("4.1") == "iceberg-spark-4.1"
    assert iceberg.iceberg_jar_set("4.3") is None  # Iceberg publishes no runtime for Spark 4.3


def test_the_spark_35_set_resolves_to_the_pinned_runtime() -> None:
    try:
        resolved = jars.classpath("iceberg-spark-3.5").split(":")
    except jars.JarsUnavailable as error:
        pytest.skip(f"Maven could not resolve here: {error}")
    assert [Path(jar).name for jar in resolved] == [
        f"iceberg-spark-runtime-3.5_2.12-{_pinned('iceberg.version')}.jar",
        f"postgresql-{_pinned('postgresql.version')}.jar",  # the JDBC catalog's driver
    ]
