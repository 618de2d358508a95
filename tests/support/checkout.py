"""`repository_copy(destination)`: the repository's files as a clone has them (committed or not,
ignored ones left out), copied to `destination`; for tests that build or install the project the way
a user does, without writing into the working tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import PROJECT_ROOT


def repository_copy(destination: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return destination


def clean_environment() -> dict[str, str]:
    """This process's environment as a user's shell would have it: no PYTHONPATH, no virtualenv
    (the suite's own off the PATH) and no lineage settings, so what runs is what was installed."""
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"} and "LINEAGE" not in key}
    suite_bin = Path(sys.executable).parent
    env["PATH"] = os.pathsep.join(entry for entry in env.get("PATH", "").split(os.pathsep) if Path(entry) != suite_bin)
    return env
