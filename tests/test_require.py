"""A missing real dependency skips a test on a developer's machine and fails it in CI."""

from __future__ import annotations

import os

import pytest

from tests.support.paths import MARQUEZ_DEMO_EVENTS, MARQUEZ_OPENAPI, OPENLINEAGE_SPEC_DIR
from tests.support.require import REQUIRE_ALL_ENV, chromium_executable, skip_or_fail


def test_a_missing_dependency_skips_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ALL_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no broker"):
        skip_or_fail("no broker")


def test_a_missing_dependency_fails_when_everything_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"no broker .*{REQUIRE_ALL_ENV}=1"):
        skip_or_fail("no broker")


def test_third_party_data_is_in_the_repository() -> None:
    for path in (OPENLINEAGE_SPEC_DIR / "OpenLineage.json", MARQUEZ_OPENAPI, MARQUEZ_DEMO_EVENTS):
        assert path.is_file(), f"{path.name} missing: run tests/fixtures/external/refresh.sh"


def test_chromium_is_found_or_named_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    try:
        path = chromium_executable()
    except pytest.fail.Exception as missing:
        assert "Chromium" in str(missing) or "Playwright" in str(missing)
    else:
        assert os.access(path, os.X_OK), path
