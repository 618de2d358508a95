"""Column lineage of plans captured from real Spark (tests/fixtures/plans/), against checked expectations."""

from __future__ import annotations

import copy

import pytest

from tests.lineage.helpers import compact, fixture_names, load_case, run_case


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_lineage(name: str) -> None:
    case = load_case(name)
    assert case.get("expected") is not None, f"{name}: no checked expectation"
    untouched = copy.deepcopy(case)

    result = run_case(case)

    assert compact(result) == {"expected": case["expected"], "dataset": case["dataset"]}
    assert list(result.warnings) == case.get("warnings", [])
    assert case == untouched, "the engine must not mutate its inputs"
