"""The emitter's release: the installed distribution's version (pyproject.toml is the one place)."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "spark-lineage"


def installed_version() -> str:
    """`0+unknown` when the code runs from a checkout that was never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"
