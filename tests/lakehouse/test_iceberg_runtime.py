"""Which Iceberg runtime the live lakehouse tests run with, and what they do without one (no Spark here)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import jars
from tests.support import iceberg
from tests.support.require import REQUIRE_ALL_ENV

POM_NAMESPACE = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pinned_iceberg_version() -> str:
    found = ElementTree.parse(jars.POM).getroot().findtext("m:properties/m:iceberg.version", namespaces=POM_NAMESPACE)
    assert found, "jars/pom.xml pins no iceberg.version"
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
    assert [Path(jar).name for jar in resolved] == [f"iceberg-spark-runtime-3.5_2.12-{_pinned_iceberg_version()}.jar"]


def _on_spark(monkeypatch: pytest.MonkeyPatch, spark_minor: str, scala: str) -> None:
    monkeypatch.setattr(iceberg, "require_spark", lambda: None)
    monkeypatch.setattr(iceberg, "spark_minor_and_scala", lambda: (spark_minor, scala))


@pytest.mark.parametrize("required", ["1", ""])
def test_a_spark_without_an_iceberg_release_skips_whatever_is_required(monkeypatch: pytest.MonkeyPatch, required: str) -> None:
    _on_spark(monkeypatch, "4.3", "2.13")
    monkeypatch.setenv(REQUIRE_ALL_ENV, required)
    with pytest.raises(pytest.skip.Exception, match=re.escape("org.apache.iceberg:iceberg-spark-runtime-4.3_2.13")):
        iceberg.require_iceberg_classpath()


def test_a_runtime_maven_cannot_fetch_skips_or_fails_when_everything_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    def unresolvable(jar_set: str) -> str:
        raise jars.JarsUnavailable(f"Maven could not resolve the {jar_set!r} jars")

    _on_spark(monkeypatch, "3.5", "2.12")
    monkeypatch.setattr(jars, "classpath", unresolvable)
    monkeypatch.delenv(REQUIRE_ALL_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="iceberg-spark-3.5"):
        iceberg.require_iceberg_classpath()
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"iceberg-spark-3.5.*{REQUIRE_ALL_ENV}=1"):
        iceberg.require_iceberg_classpath()
