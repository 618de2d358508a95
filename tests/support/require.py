"""What a test does when a real dependency it needs is missing.

``skip_or_fail(reason)``
    Skips the test with ``reason`` on a developer's machine; fails it (naming what is missing) when
    ``LINEAGE_REQUIRE_ALL=1`` is set, as ``.ci/run`` does, so CI can never go green on a weaker suite.
    Call it for PostgreSQL, the broker, Java/Spark, Chromium: anything the suite requires in CI.
``chromium_executable() -> str``
    A Chromium for the browser test (Playwright's, else the system's), or ``skip_or_fail``.
``marquez_web_dist() -> Path``
    The prebuilt Marquez Web (``tests/fixtures/external/marquez-web/dist``), or ``skip_or_fail``
    where a checkout lacks it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support.paths import MARQUEZ_WEB_DIST

REQUIRE_ALL_ENV = "LINEAGE_REQUIRE_ALL"


def require_all() -> bool:
    return os.environ.get(REQUIRE_ALL_ENV, "").strip().lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> NoReturn:
    if require_all():
        pytest.fail(f"{reason} ({REQUIRE_ALL_ENV}=1: every real dependency is required)", pytrace=False)
    pytest.skip(reason)


def chromium_executable() -> str:
    """Playwright's own Chromium when installed, else the system's (Debian: `apt-get install chromium`);
    launch it with `chromium.launch(executable_path=...)`."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        skip_or_fail(f"Playwright is not installed ({error})")
    with sync_playwright() as playwright:
        bundled = playwright.chromium.executable_path
    found = bundled if Path(bundled).is_file() else shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        skip_or_fail("no Chromium: neither Playwright's (python -m playwright install chromium) nor a system chromium")
    return found


def marquez_web_dist() -> Path:
    if not (MARQUEZ_WEB_DIST / "index.html").is_file():
        skip_or_fail(f"prebuilt Marquez Web not found ({MARQUEZ_WEB_DIST})")
    return MARQUEZ_WEB_DIST
