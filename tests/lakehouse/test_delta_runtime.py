"""Which Delta jars the live lakehouse tests run with, and what they do without them (no Spark here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jars
from tests.support import delta
from tests.support.require import REQUIRE_ALL_ENV


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


def _on_spark(monkeypatch: pytest.MonkeyPatch, spark_minor: str, scala: str) -> None:
    monkeypatch.setattr(delta, "require_spark", lambda: None)
    monkeypatch.setattr(delta, "spark_minor_and_scala", lambda: (spark_minor, scala))


@pytest.mark.parametrize("required", ["1", ""])
def test_a_spark_without_a_delta_release_skips_whatever_is_required(monkeypatch: pytest.MonkeyPatch, required: str) -> None:
    _on_spark(monkeypatch, "4.3", "2.13")
    monkeypatch.setenv(REQUIRE_ALL_ENV, required)
    with pytest.raises(pytest.skip.Exception, match=re.escape("io.delta:delta-spark_2.13 built for Spark 4.3")):
        delta.require_delta_classpath()


def test_jars_maven_cannot_fetch_skip_or_fail_when_everything_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    def unresolvable(jar_set: str) -> str:
        raise jars.JarsUnavailable(f"Maven could not resolve the {jar_set!r} jars")

    _on_spark(monkeypatch, "3.5", "2.12")
    monkeypatch.setattr(jars, "classpath", unresolvable)
    monkeypatch.delenv(REQUIRE_ALL_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="delta-spark-3.5"):
        delta.require_delta_classpath()
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"delta-spark-3.5.*{REQUIRE_ALL_ENV}=1"):
        delta.require_delta_classpath()
