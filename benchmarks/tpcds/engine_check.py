"""What the emitter's own lineage engine says about a captured write, recomputed after the run.

The events cannot tell a source-less column from a lost one (the facet omits both), so the
runner keeps the captures the pipeline received and asks the engine again, outside the timed
part: a column the engine resolves to no input at all, in a plan where it raised no warning,
is one the engine marks as source-less (a literal, `count(*)`, `grouping()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from emitter.dedupe import WRAPPER_COMMANDS
from emitter.lineage import column_lineage, write_command
from emitter.plan import parse_plan


@attrs.frozen
class EngineVerdict:
    source_less: tuple[str, ...]  # output columns the engine resolved to no input
    warnings: tuple[str, ...]


def run_capture(captures: Sequence[Any]) -> Any | None:
    """The capture the pipeline turns into the run: the write that is not a wrapper command."""
    writes = [capture for capture in captures if capture.write is not None]
    preferred = [capture for capture in writes if capture.write.command not in WRAPPER_COMMANDS]
    return (preferred or writes or [None])[0]


def verdict(capture: Any) -> EngineVerdict:
    """The engine's view of `capture`, computed the way the pipeline computes its facet."""
    root = parse_plan(capture.plan_json)
    command = write_command(root)
    query = command.query if command is not None else root
    output_columns = capture.write.output_columns or (command.output_columns if command is not None else ())
    cached = {key: parse_plan(text) for key, text in capture.cached_plan_jsons.items()}
    result = column_lineage(query, cached, tuple(output_columns) or None)
    empty = tuple(name for name, edges in result.columns.items() if not edges)
    return EngineVerdict(source_less=empty, warnings=tuple(result.warnings))
