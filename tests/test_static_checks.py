"""ruff (lint and format), mypy and the import contracts (`lint-imports`, the layers of
pyproject.toml's [tool.importlinter]) over the repository: part of the suite, so a change that
breaks them fails `./run tests` like any other regression."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import PROJECT_ROOT

LINT_IMPORTS = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
]
CHECKS = {
    "ruff lint": [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
    "ruff format": [sys.executable, "-m", "ruff", "format", "--check", "."],
    "mypy": [sys.executable, "-m", "mypy"],
    "import contracts": [*LINT_IMPORTS, "--no-cache"],
}


def _run(command: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    # the packages of `root`, not an installed copy; wide lines: one line per contract in the report
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "250"}
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_static_check_passes(name: str) -> None:
    result = _run(CHECKS[name], PROJECT_ROOT)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize(
    ("module", "added_import", "broken_contract"),
    [
        ("emitter/plan.py", "from emitter.listener import janino", "listener -> pipeline -> pure engine"),
        ("emitter/transports/records.py", "from emitter import capture", "listener -> pipeline -> pure engine"),
        ("emitter/pipeline.py", "import pyspark", "the pure modules import neither"),
        ("emitter/lineage/graph.py", "from emitter.transports import records", "the pure modules import neither"),
        ("consumer/store/store.py", "from consumer.ingest import fold", "meet only at the store"),
        ("consumer/query/graph.py", "from consumer.ingest import validate", "meet only at the store"),
        ("consumer/ingest/fold.py", "import emitter.plan", "never import each other"),
    ],
)
def test_an_import_against_the_layers_fails_the_contracts(
    tmp_path: Path, module: str, added_import: str, broken_contract: str
) -> None:
    for package in ("emitter", "consumer"):
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _run([*LINT_IMPORTS, "--no-cache"], tmp_path).returncode == 0, "the copy keeps the contracts"
    target = tmp_path / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{added_import}  # an arrow back up\n", encoding="utf-8")
    result = _run([*LINT_IMPORTS, "--no-cache"], tmp_path)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(broken_contract in line for line in broken), result.stdout
