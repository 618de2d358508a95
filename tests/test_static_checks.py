"""ruff (lint and format) and mypy over the repository, as configured in pyproject.toml: part of
the suite, so a change that breaks them fails `./run tests` like any other regression."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import PROJECT_ROOT

CHECKS = {
    "ruff lint": [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
    "ruff format": [sys.executable, "-m", "ruff", "format", "--check", "."],
    "mypy": [sys.executable, "-m", "mypy"],
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_static_check_passes(name: str) -> None:
    result = subprocess.run(CHECKS[name], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
