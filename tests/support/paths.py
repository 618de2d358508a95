"""Where the project and the read-only shared data (beside the project root) are."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = PROJECT_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared data not found beside the project root ({SHARED_DIR.name}/)")
    return SHARED_DIR
