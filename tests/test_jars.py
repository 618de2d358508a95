"""The one mechanism that fetches the Maven artifacts the tests, benchmarks and images run (jars/)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import jars
from tests.support.kafka_server import _started
from tests.support.require import REQUIRE_ALL_ENV

POM_NAMESPACE = {"m": "http://maven.apache.org/POM/4.0.0"}


def pinned(property_name: str) -> str:
    found = ElementTree.parse(jars.POM).getroot().find(f"m:properties/m:{property_name}", POM_NAMESPACE)
    assert found is not None and found.text, property_name
    return found.text


def test_every_set_in_the_pom_is_known_and_every_version_is_a_property() -> None:
    root = ElementTree.parse(jars.POM).getroot()
    profiles = {
        profile.findtext("m:id", namespaces=POM_NAMESPACE) for profile in root.iterfind("m:profiles/m:profile", POM_NAMESPACE)
    }
    assert profiles == set(jars.SETS)
    versions = [version.text or "" for version in root.iterfind(".//m:dependency/m:version", POM_NAMESPACE)]
    assert versions and all(re.fullmatch(r"\$\{[\w.]+\}", version) for version in versions), versions


def test_the_kafka_set_resolves_to_the_pinned_broker() -> None:
    try:
        resolved = jars.classpath("kafka").split(":")
    except jars.JarsUnavailable as error:
        pytest.skip(f"Maven could not resolve here: {error}")
    names = {Path(jar).name for jar in resolved}
    assert f"kafka_{pinned('kafka.scala')}-{pinned('kafka.version')}.jar" in names
    assert all(Path(jar).is_file() for jar in resolved)
    assert jars.classpath("kafka") == ":".join(resolved)  # the second call answers from .run/jars


def test_an_unknown_set_is_refused_by_name() -> None:
    with pytest.raises(jars.JarsUnavailable, match="unknown jar set 'spark-agent'"):
        jars.classpath("spark-agent")


def test_no_maven_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(jars.JarsUnavailable, match=r"Maven \(mvn\) is not installed"):
        jars._maven("kafka", "validate")


def test_a_missing_jar_fails_a_test_when_everything_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    def unresolvable() -> None:
        raise jars.JarsUnavailable("Maven could not resolve the 'kafka' jars")

    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"no Apache Kafka: Maven could not resolve .*{REQUIRE_ALL_ENV}=1"):
        _started(unresolvable)
    monkeypatch.delenv(REQUIRE_ALL_ENV)
    with pytest.raises(pytest.skip.Exception, match="no Apache Kafka"):
        _started(unresolvable)
