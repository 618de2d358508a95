"""What the live lakehouse tests do where a table format's jars cannot be had (no Spark here): a
Spark version the format publishes no release for skips, whatever is required; jars Maven cannot
fetch skip, or fail when everything is required."""

from __future__ import annotations

import re

import pytest

import jars
from tests.support import delta, iceberg, lakehouse
from tests.support.require import REQUIRE_ALL_ENV

FORMATS = {
    "iceberg": (iceberg.require_iceberg_classpath, "iceberg-spark-3.5", "org.apache.iceberg:iceberg-spark-runtime-4.3_2.13"),
    "delta": (delta.require_delta_classpath, "delta-spark-3.5", "io.delta:delta-spark_2.13 built for Spark 4.3"),
}


def _on_spark(monkeypatch: pytest.MonkeyPatch, spark_minor: str, scala: str) -> None:
    monkeypatch.setattr(lakehouse, "require_spark", lambda: None)
    monkeypatch.setattr(lakehouse, "spark_minor_and_scala", lambda: (spark_minor, scala))


@pytest.mark.parametrize("required", ["1", ""])
@pytest.mark.parametrize("table_format", sorted(FORMATS))
def test_a_spark_without_a_release_of_the_format_skips_whatever_is_required(
    monkeypatch: pytest.MonkeyPatch, table_format: str, required: str
) -> None:
    require_classpath, _, missing_release = FORMATS[table_format]
    _on_spark(monkeypatch, "4.3", "2.13")
    monkeypatch.setenv(REQUIRE_ALL_ENV, required)
    with pytest.raises(pytest.skip.Exception, match=re.escape(missing_release)):
        require_classpath()


@pytest.mark.parametrize("table_format", sorted(FORMATS))
def test_jars_maven_cannot_fetch_skip_or_fail_when_everything_is_required(
    monkeypatch: pytest.MonkeyPatch, table_format: str
) -> None:
    require_classpath, jar_set, _ = FORMATS[table_format]

    def unresolvable(jar_set: str) -> str:
        raise jars.JarsUnavailable(f"Maven could not resolve the {jar_set!r} jars")

    _on_spark(monkeypatch, "3.5", "2.12")
    monkeypatch.setattr(jars, "classpath", unresolvable)
    monkeypatch.delenv(REQUIRE_ALL_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=jar_set):
        require_classpath()
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{jar_set}.*{REQUIRE_ALL_ENV}=1"):
        require_classpath()
