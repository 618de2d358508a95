"""The composition rule for transformations along a lineage path (documented in emitter.lineage.model)."""

from __future__ import annotations

from emitter.lineage.model import (
    AGGREGATION,
    CONDITIONAL,
    DIRECT,
    IDENTITY,
    INDIRECT,
    TRANSFORMATION,
    WINDOW,
    Transformation,
    compose,
)

RENAME = Transformation(DIRECT, IDENTITY, "name AS customer_name")
UPPER = Transformation(DIRECT, TRANSFORMATION, "upper(name)")
SUM = Transformation(DIRECT, AGGREGATION, "sum(upper(name))")
CONDITION = Transformation(INDIRECT, CONDITIONAL, "CASE WHEN (age > 18) THEN name END")
PARTITION = Transformation(INDIRECT, WINDOW, "rank() OVER (PARTITION BY x)")
COUNT = Transformation(DIRECT, AGGREGATION, "count(x)", masking=True)


def test_identity_is_neutral_and_keeps_the_inner_description() -> None:
    assert compose(RENAME, UPPER) == UPPER
    assert compose(Transformation(DIRECT, IDENTITY), RENAME) == RENAME


def test_stronger_direct_subtype_wins_with_outer_description() -> None:
    assert compose(SUM, UPPER) == Transformation(DIRECT, AGGREGATION, "sum(upper(name))")
    assert compose(UPPER, SUM).subtype == AGGREGATION


def test_indirect_beats_direct_and_innermost_indirect_wins() -> None:
    assert compose(SUM, CONDITION) == Transformation(INDIRECT, CONDITIONAL, "sum(upper(name))")
    assert compose(CONDITION, UPPER).subtype == CONDITIONAL
    assert compose(PARTITION, CONDITION).subtype == CONDITIONAL


def test_masking_is_ored_along_the_path() -> None:
    assert compose(UPPER, COUNT).masking
    assert compose(COUNT, RENAME).masking
    assert not compose(UPPER, RENAME).masking
