"""The dedupe of wrapper commands: which Spark actions become runs, decided as they arrive.

Spark reports one saveAsTable / CTAS as a nested data write (first, with a higher
QueryExecution id; see `is_nested_write`) and then each wrapper command. The nested write is
held until its wrapper arrives and merged into it (the wrapper knows the catalog table; the
nested write the path, metrics and plan); outer wrappers of an already merged write are
dropped. Writes of other threads may come in between, so several nested writes can wait at
once, each for the wrapper that `wraps` it.

`WrapperDedupe` is the batch listener's own component: Spark calls the listener on one thread
(its listener bus), so the dedupe sees actions in the order Spark reports them and needs no
lock; the listener asks it `merges` before copying a wrapper's plan out of the JVM, and hands
what `accept` returns to the attachment's pipeline thread. Plain Python over captures.
"""

from __future__ import annotations

from collections import deque
from urllib.parse import unquote, urlsplit

from attrs import evolve

from emitter.capture import Capture, RelationInfo

# Commands that only wrap a nested data-writing command: Spark reports both (the nested one
# first, with a higher QueryExecution id); the nested one is the run, the wrapper is dropped.
# A V2 CTAS / RTAS (CreateTableAsSelect, ReplaceTableAsSelect) writes its data as a nested V2
# write (AppendData, OverwriteByExpression).
WRAPPER_COMMANDS = frozenset(
    {
        "SaveAsV1TableCommand",
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoDataSourceDirCommand",
        "InsertIntoHiveDirCommand",
        "CreateTableAsSelect",
        "ReplaceTableAsSelect",
    }
)
# How the JVM tagger names the wrappers a write ran nested in: the physical plan's node names,
# which are the commands' own but for a staging catalog's atomic CTAS / RTAS.
WRAPPER_NODES = WRAPPER_COMMANDS | {"AtomicCreateTableAsSelect", "AtomicReplaceTableAsSelect"}
RECENT_WRITES_KEPT = 64
PENDING_KEPT = 16
NESTED_WRITE_FUNC = "file source write"


class WrapperDedupe:
    """Holds nested writes until their wrapper command arrives; one per batch listener."""

    def __init__(self, emit_reads: bool = False) -> None:
        self.emit_reads = emit_reads  # actions that write nothing become runs too
        self._pending: list[Capture] = []  # nested writes waiting for their wrappers, oldest first
        self._merged: deque[tuple[str, int]] = deque(maxlen=RECENT_WRITES_KEPT)  # (table, wrapper qe id)

    def accept(self, capture: Capture) -> list[Capture]:
        """The actions ready to become runs now that `capture` arrived (cheap: no lineage)."""
        if is_nested_write(capture):
            self._pending.append(capture)
            overflow = len(self._pending) - PENDING_KEPT
            if overflow > 0:  # a wrapper that never came: the write becomes a run as it is
                ready, self._pending = self._pending[:overflow], self._pending[overflow:]
                return ready
            return []
        if capture.write is not None and capture.write.command in WRAPPER_COMMANDS:
            table = _table_name(capture.write.target)
            for pending in self._pending:
                if wraps(capture.query_execution_id, capture.write.target, pending):
                    self._pending.remove(pending)
                    self._merged.append((table, capture.query_execution_id))
                    return [merge_nested(pending, capture)]
            if self._wraps_merged(capture.query_execution_id, table):
                return []
        if capture.write is not None or (self.emit_reads and capture.leaves):
            return [capture]
        return []

    def merges(self, command: str, wrapper_id: int, wrapper_target: RelationInfo) -> bool:
        """Whether a write command (class, QueryExecution id, target) is a wrapper that `accept`
        will merge into a nested write it holds or has merged: then the listener need not copy
        its plan, leaves or snapshots."""
        if command not in WRAPPER_COMMANDS:
            return False
        pending = any(wraps(wrapper_id, wrapper_target, nested) for nested in self._pending)
        return pending or self._wraps_merged(wrapper_id, _table_name(wrapper_target))

    def drain(self) -> list[Capture]:
        """The nested writes still waiting for their wrappers (at the end of the application)."""
        ready, self._pending = self._pending, []
        return ready

    def _wraps_merged(self, wrapper_id: int, table: str) -> bool:
        """Whether a wrapper is an outer wrapper of a write already merged (saveAsTable reports
        two: both carry the table, the outer one with the lower QueryExecution id)."""
        return any(name == table and qe_id > wrapper_id for name, qe_id in self._merged)


def is_nested_write(capture: Capture) -> bool:
    """Whether a write is the data write of a wrapper command still to come: Spark 4 names its
    action NESTED_WRITE_FUNC; on Spark 3.5 the listener tells which command it ran inside; a V2
    write into a staged table is an atomic CTAS / RTAS's, on any Spark version."""
    if capture.write is None or capture.write.command in WRAPPER_COMMANDS:
        return False
    return capture.func_name == NESTED_WRITE_FUNC or capture.wrapped_by in WRAPPER_NODES or capture.write.into_staged_table


def _table_name(target: RelationInfo) -> str:
    return target.table.name.lower() if target.table is not None else ""


def wraps(wrapper_id: int, wrapper_target: RelationInfo, nested: Capture) -> bool:
    """Whether a wrapper command (CTAS / saveAsTable: QueryExecution id, write target) is the
    command that ran the data write `nested` reported just before it. Spark reports the nested
    write first, with a higher QueryExecution id; since actions of other threads can come in
    between, the targets must agree too: the same location when the wrapper knows it, else a
    directory named after the table (a managed table's); with neither known, the order alone."""
    if nested.query_execution_id <= wrapper_id or nested.write is None:
        return False
    written = nested.write.target.paths[0] if nested.write.target.paths else None
    if written is None:
        return True
    if wrapper_target.table_location:
        return _local_path(written) == _local_path(wrapper_target.table_location)
    if wrapper_target.table is not None:
        return _local_path(written).rsplit("/", 1)[-1].lower() == wrapper_target.table.name.lower()
    return True


def _local_path(uri: str) -> str:
    return unquote(urlsplit(uri).path).rstrip("/")


def merge_nested(nested: Capture, wrapper: Capture) -> Capture:
    """One action from a nested data write and the command that wrapped it."""
    if nested.write is None or wrapper.write is None:
        raise ValueError("merge_nested needs two writes")
    target = nested.write.target
    if wrapper.write.target.table is not None:
        location = target.paths[0] if target.paths else wrapper.write.target.table_location or target.table_location
        target = evolve(target, table=wrapper.write.target.table, table_location=location)
    write = evolve(
        nested.write,
        command=wrapper.write.command,
        target=target,
        mode=wrapper.write.mode or nested.write.mode,
    )
    return evolve(
        nested,
        func_name=wrapper.func_name,
        query_execution_id=wrapper.query_execution_id,
        end_time=max(nested.end_time, wrapper.end_time),
        duration_ns=max(nested.duration_ns, wrapper.duration_ns),
        succeeded=nested.succeeded and wrapper.succeeded,
        error_message=nested.error_message or wrapper.error_message,
        error_stack=nested.error_stack or wrapper.error_stack,
        write=write,
        extraction_ms=nested.extraction_ms + wrapper.extraction_ms,
        micro_batch=nested.micro_batch or wrapper.micro_batch,
        # a staged table's data write knows no location: a Delta CTAS's version is the wrapper's
        output_snapshot=nested.output_snapshot or wrapper.output_snapshot,
    )
