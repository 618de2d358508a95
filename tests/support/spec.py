"""Validation of events against the official OpenLineage JSON Schemas (tests/fixtures/external/openlineage-spec)
plus our own custom facet schemas (schemas/), resolving every `$ref` by `$id`."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.paths import OPENLINEAGE_SPEC_DIR, PROJECT_ROOT

SPEC_DIR = OPENLINEAGE_SPEC_DIR
CUSTOM_SCHEMAS_DIR = PROJECT_ROOT / "schemas" / "1-0-0"


def _load_resources() -> dict[str, dict[str, Any]]:
    schemas: dict[str, dict[str, Any]] = {}
    paths = [SPEC_DIR / "OpenLineage.json", *sorted((SPEC_DIR / "facets").glob("*.json"))]
    paths += sorted(CUSTOM_SCHEMAS_DIR.glob("*.json"))
    for path in paths:
        schema = json.loads(path.read_text())
        schemas[schema["$id"]] = schema
    return schemas


@lru_cache(maxsize=1)
def _registry_and_core() -> tuple[Registry, dict[str, Any]]:
    schemas = _load_resources()
    registry = Registry().with_resources((schema_id, Resource.from_contents(schema)) for schema_id, schema in schemas.items())
    core = json.loads((SPEC_DIR / "OpenLineage.json").read_text())
    return registry, core


def _facet_schema_ref(facet: dict[str, Any]) -> str | None:
    url = facet.get("_schemaURL")
    if not isinstance(url, str) or "#" not in url:
        return None
    return url


def spec_errors(event: dict[str, Any]) -> list[str]:
    """Every way `event` breaks the core spec or the schema its facets name (empty when valid)."""
    registry, core = _registry_and_core()
    validator = Draft202012Validator(core, registry=registry)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(event)]
    for where, facet in _iter_facets(event):
        ref = _facet_schema_ref(facet)
        if ref is None:
            continue
        base, _, fragment = ref.partition("#")
        if base not in {r for r in registry}:  # a facet whose schema we do not hold
            continue
        facet_validator = Draft202012Validator({"$ref": ref}, registry=registry)
        errors += [f"{where}: {e.message}" for e in facet_validator.iter_errors(facet)]
    return errors


def _iter_facets(event: dict[str, Any]):
    for section in ("run", "job"):
        for name, facet in (event.get(section, {}).get("facets") or {}).items():
            yield f"{section}.facets.{name}", facet
    for side in ("inputs", "outputs"):
        for index, dataset in enumerate(event.get(side) or []):
            for key in ("facets", "inputFacets", "outputFacets"):
                for name, facet in (dataset.get(key) or {}).items():
                    yield f"{side}[{index}].{key}.{name}", facet
    dataset = event.get("dataset")
    if isinstance(dataset, dict):
        for name, facet in (dataset.get("facets") or {}).items():
            yield f"dataset.facets.{name}", facet


def assert_valid_event(event: dict[str, Any]) -> None:
    errors = spec_errors(event)
    assert not errors, "event breaks the OpenLineage spec:\n" + "\n".join(errors[:20])


@pytest.fixture(scope="session")
def openlineage_spec() -> Callable[[dict[str, Any]], None]:
    """`assert_valid_event`, for tests that take it as a fixture."""
    return assert_valid_event
