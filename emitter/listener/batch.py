"""The batch hook: a Python `QueryExecutionListener` (called through py4j on Spark's listener bus
thread) that copies each action into a `Capture` and hands it to the pipeline.

It must never disturb the job: every callback is wrapped, failures are logged and dropped.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from attrs import evolve

from emitter.capture import Capture, RelationInfo
from emitter.listener import files, jvm
from emitter.pipeline import NESTED_WRITE_FUNC, PENDING_KEPT, WRAPPER_COMMANDS, wraps

log = logging.getLogger(__name__)

STACK_TRACE_LIMIT = 16_000


class BatchListener:
    """Implements org.apache.spark.sql.util.QueryExecutionListener for py4j."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    def __init__(self, gateway: Any, handle: Callable[[Capture], Any]) -> None:
        self.dumper = jvm.PlanDumper(gateway)
        self.gateway = gateway
        self.handle = handle
        self.extraction_ms: list[float] = []  # per captured action, for benchmarks and reports
        # the nested data writes handed over last, for the wrapper commands that follow them
        self._nested_writes: deque[Capture] = deque(maxlen=PENDING_KEPT)

    def onSuccess(self, func_name: str, query_execution: Any, duration_ns: int) -> None:  # noqa: N802
        self._on_action(func_name, query_execution, duration_ns, None)

    def onFailure(self, func_name: str, query_execution: Any, exception: Any) -> None:  # noqa: N802
        self._on_action(func_name, query_execution, None, exception)

    def _on_action(self, func_name: str, query_execution: Any, duration_ns: int | None, exception: Any) -> None:
        try:
            capture = self.capture(func_name, query_execution, duration_ns, exception, tuple(self._nested_writes))
            if capture is not None:
                self.handle(capture)
                if capture.func_name == NESTED_WRITE_FUNC and capture.write is not None:
                    self._nested_writes.append(capture)
        except Exception as error:  # noqa: BLE001 - never let lineage break the job
            log.warning("OpenLineage: action %r not captured: %s", func_name, error, exc_info=log.isEnabledFor(10))

    def capture(
        self, func_name: str, query_execution: Any, duration_ns: int | None, exception: Any,
        nested_writes: tuple[Capture, ...] = (),
    ) -> Capture | None:
        """`nested_writes`: the nested data writes captured last. A wrapper command (CTAS,
        saveAsTable) that `pipeline.wraps` one of them is merged into it by the pipeline, which
        takes only its target table, mode and outcome: its plan, leaves and snapshots are not
        copied out (the plan of a CTAS wrapper is the whole query again)."""
        started = time.perf_counter()
        end_time = datetime.now(timezone.utc)
        plan = query_execution.optimizedPlan()
        root_class = jvm.simple_class(plan)
        query_execution_id = int(query_execution.id())
        may_merge = root_class in WRAPPER_COMMANDS and bool(nested_writes)
        write = jvm.write_info(plan, root_class, query_execution, with_metrics=not may_merge)
        merged_wrapper = may_merge and write is not None and any(
            wraps(query_execution_id, write.target, nested) for nested in nested_writes)
        if may_merge and write is not None and not merged_wrapper:
            write = evolve(write, metrics=jvm.executed_write_metrics(query_execution))
        if merged_wrapper:
            leaves, cached_plans, input_snapshots, plan_json = {}, {}, {}, ""
        else:
            leaves, cached_plans, input_snapshots = self._leaves(plan)
            if write is None and not leaves:
                return None
            plan_json = self.dumper.to_json(plan)
        error_message, error_stack = _error_text(exception, self.gateway) if exception is not None else (None, None)
        extraction_ms = (time.perf_counter() - started) * 1000
        self.extraction_ms.append(extraction_ms)
        return Capture(
            func_name=str(func_name),
            query_execution_id=query_execution_id,
            end_time=end_time,
            duration_ns=int(duration_ns or 0),
            plan_json=plan_json,
            succeeded=exception is None,
            error_message=error_message,
            error_stack=error_stack,
            root_class=root_class,
            leaves=leaves,
            cached_plan_jsons=cached_plans,
            write=write,
            extraction_ms=extraction_ms,
            query_execution_uuid=jvm.guarded(None, lambda: str(query_execution.queryId().toString())),
            input_snapshots=input_snapshots,
        )

    def _leaves(self, plan: Any) -> tuple[dict[int, RelationInfo], dict[int, str], dict[int, Any]]:
        """Every leaf relation keyed by leaf_key, following cached DataFrames into the plan they
        cache; plus the snapshot of each file source, read from the file index Spark already listed."""
        described = self.dumper.describe_leaves(plan)
        if described is not None and jvm.fully_described(described):
            return self._described_leaves(plan, described)
        leaves: dict[int, RelationInfo] = {}
        cached_plans: dict[int, str] = {}
        input_snapshots: dict[int, Any] = {}
        pending = [plan]
        while pending:
            for leaf in jvm.leaves_with_subqueries(pending.pop()):
                key = jvm.leaf_key(leaf)
                if key is None:
                    continue
                node_class = jvm.simple_class(leaf)
                # an InMemoryRelation shares expr ids with the plan it caches: separate key spaces
                if node_class == "InMemoryRelation":
                    if key in cached_plans:
                        continue
                    cached_plan = leaf.cacheBuilder().logicalPlan()
                    cached_plans[key] = self.dumper.to_json(cached_plan)
                    pending.append(cached_plan)
                    continue
                if key in leaves:
                    continue
                info = jvm.relation_info(leaf, node_class)
                if info.paths or info.table is not None:
                    leaves[key] = info
                if node_class == "LogicalRelation":
                    snapshot = jvm.guarded(None, files.leaf_input_snapshot, self.gateway.jvm, leaf)
                    if snapshot is not None:
                        input_snapshots[key] = snapshot
        return leaves, cached_plans, input_snapshots


    def _described_leaves(
        self, plan: Any, described: list[dict[str, Any]]
    ) -> tuple[dict[int, RelationInfo], dict[int, str], dict[int, Any]]:
        """The fast path: every leaf came in one helper call (file sources, local data)."""
        leaves: dict[int, RelationInfo] = {}
        for description in described:
            info = jvm.described_relation(description)
            if info is not None and description.get("key") is not None:
                leaves.setdefault(description["key"], info)
        input_snapshots: dict[int, Any] = {}
        needs_live_leaf: set[int] = set()
        for description in described:
            key = description.get("key")
            if key in leaves and key not in input_snapshots and key not in needs_live_leaf:
                snapshot = jvm.guarded(None, files.described_input_snapshot, description)
                if snapshot is files.NEEDS_LIVE_LEAF:
                    needs_live_leaf.add(key)
                elif snapshot is not None:
                    input_snapshots[key] = snapshot
        if needs_live_leaf:  # rare (helper failed on a leaf, remote table location): py4j per leaf
            for description, leaf in zip(described, jvm.leaves_with_subqueries(plan)):
                key = description.get("key")
                if key in needs_live_leaf and key not in input_snapshots:
                    snapshot = jvm.guarded(None, files.leaf_input_snapshot, self.gateway.jvm, leaf)
                    if snapshot is not None:
                        input_snapshots[key] = snapshot
        return leaves, {}, input_snapshots


def _error_text(exception: Any, gateway: Any) -> tuple[str, str | None]:
    message = str(exception.toString())
    try:
        stack = str(gateway.jvm.org.apache.spark.util.Utils.exceptionString(exception))[:STACK_TRACE_LIMIT]
    except Exception:  # noqa: BLE001
        stack = None
    return message, stack
