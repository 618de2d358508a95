"""Where the project and its third-party test data (tests/fixtures/external, see its README) are."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXTERNAL_FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "external"
OPENLINEAGE_SPEC_DIR = EXTERNAL_FIXTURES / "openlineage-spec"
MARQUEZ_OPENAPI = EXTERNAL_FIXTURES / "marquez" / "openapi.yml"
MARQUEZ_DEMO_EVENTS = EXTERNAL_FIXTURES / "marquez" / "metadata.json"
MARQUEZ_WEB_DIST = EXTERNAL_FIXTURES / "marquez-web" / "dist"
OPENLINEAGE_SAMPLES_DIR = EXTERNAL_FIXTURES / "openlineage-samples"
# pyproject.toml is the one place the version is written
PROJECT_VERSION = re.search(r'^version = "([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(), re.MULTILINE)[1]  # type: ignore[index]


def third_party_events() -> list[dict[str, Any]]:
    """Marquez's demo events then every sample event from other producers, in file-name order."""
    events: list[dict[str, Any]] = []
    for path in [MARQUEZ_DEMO_EVENTS, *sorted(OPENLINEAGE_SAMPLES_DIR.glob("*.json"))]:
        loaded = json.loads(path.read_text())
        events += loaded if isinstance(loaded, list) else [loaded]
    return events
