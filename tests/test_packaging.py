"""The release as a user installs it: the wheel built from a copy of the repository carries the
licence, the notice and the version pyproject.toml sets. That each extra installs without the other
half's dependencies and runs is tested on the virtualenvs docs/quickstart.md has a user make
(tests/docs/test_quickstart.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.checkout import clean_environment, repository_copy
from tests.support.paths import PROJECT_VERSION

INSTALL_TIMEOUT_SECONDS = 600


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**clean_environment(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = repository_copy(tmp_path_factory.mktemp("source"))
    built = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(built), str(source)], source)
    (found,) = built.glob("spark_lineage-*.whl")
    return found


def test_the_wheel_carries_the_licence_the_notice_and_the_version(wheel: Path) -> None:
    assert wheel.name == f"spark_lineage-{PROJECT_VERSION}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"spark_lineage-{PROJECT_VERSION}.dist-info/licenses/{name}" for name in ("LICENSE", "NOTICE")} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(f"spark_lineage-{PROJECT_VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
