"""Result types of column lineage and the rule that composes transformations along a path."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import field, frozen

from emitter.plan import Node

DIRECT = "DIRECT"
INDIRECT = "INDIRECT"
IDENTITY = "IDENTITY"
TRANSFORMATION = "TRANSFORMATION"
AGGREGATION = "AGGREGATION"
JOIN = "JOIN"
FILTER = "FILTER"
GROUP_BY = "GROUP_BY"
SORT = "SORT"
WINDOW = "WINDOW"
CONDITIONAL = "CONDITIONAL"

DIRECT_STRENGTH = {IDENTITY: 0, TRANSFORMATION: 1, AGGREGATION: 2}


@frozen
class Transformation:
    """How an input column reaches an output (OpenLineage columnLineage transformation)."""

    type: str
    subtype: str
    description: str = ""
    masking: bool = False


IDENTITY_STEP = Transformation(DIRECT, IDENTITY)


@frozen
class InputEdge:
    """One input column of an output column (or of the dataset): a leaf relation and its column."""

    relation: Node
    column: str
    transformations: tuple[Transformation, ...]


@frozen
class ColumnLineage:
    columns: Mapping[str, tuple[InputEdge, ...]]
    dataset: tuple[InputEdge, ...]
    relations: tuple[Node, ...]
    warnings: tuple[str, ...] = field(factory=tuple)


def compose(outer: Transformation, inner: Transformation) -> Transformation:
    """The transformation of a path `source -inner-> middle -outer-> output`.

    - INDIRECT wins over DIRECT; between two INDIRECT steps the inner one wins, because it
      says how the *source* column is used (a CASE condition stays CONDITIONAL under a sum).
    - Between DIRECT steps the stronger subtype wins: AGGREGATION > TRANSFORMATION > IDENTITY.
    - masking is ORed.
    - description: the outermost non-IDENTITY step's text (computed columns are rendered with
      their defining expressions inlined, so it already contains the inner text); through
      IDENTITY-only paths, the outermost non-empty rename.
    """
    if inner.type == INDIRECT:
        kind, subtype = INDIRECT, inner.subtype
    elif outer.type == INDIRECT:
        kind, subtype = INDIRECT, outer.subtype
    else:
        kind = DIRECT
        subtype = max(outer.subtype, inner.subtype, key=lambda name: DIRECT_STRENGTH.get(name, 1))
    if outer.type == DIRECT and outer.subtype == IDENTITY:
        description = inner.description if inner.subtype != IDENTITY or not outer.description else outer.description
        description = description or outer.description
    else:
        description = outer.description or inner.description
    return Transformation(kind, subtype, description, outer.masking or inner.masking)
