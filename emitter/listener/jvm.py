"""py4j side of the Java helpers that copy what the pipeline needs out of the JVM: one round trip
each, one extraction path per fact.

- `PlanDumper.describe`: every leaf of a plan (and its subqueries, and the plans cached
  DataFrames hold) and the plan's JSON (`java/SparkLineagePlanDumper.java`, relations described
  by `java/SparkLineageRelations.java`).
- `ActionDescriber.describe`: what the batch listener needs of one callback in one round trip:
  the plan's class, the QueryExecution id, the micro-batch tagger's tags, the write an action ran
  with its executed metrics (`java/SparkLineageWrites.java`, configured by `WriteDescriber`: the
  one list of the write commands the emitter knows), what Iceberg reported of its scans and
  commits (`java/SparkLineageIceberg.java`, when Iceberg is on the classpath), and the plan's
  description when needed (`java/SparkLineageActions.java`, over the dumper and the writes).
  The batch listener's registration (`QueryListenerRegistration`) has the JVM make that
  description before it calls the listener, and hand it over with the callback.

Their JSON is parsed by `emitter.described` (pure). The helpers are compiled by Janino, which
Spark ships for its own code generation (`emitter.listener.janino`); when they cannot be had
(logged once per JVM), `available` is False and the listeners capture what needs no helper.
Of data source options only the keys that name a dataset (`naming.NAMING_OPTIONS`) leave the JVM.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from emitter.capture import WriteInfo
from emitter.described import DescribedAction, DescribedPlan, described_write, parse_described_action, parse_described_plan
from emitter.listener import janino
from emitter.naming import NAMING_OPTIONS

log = logging.getLogger(__name__)

DUMPER_CLASS = "SparkLineagePlanDumper"
WRITES_CLASS = "SparkLineageWrites"
ACTIONS_CLASS = "SparkLineageActions"
ICEBERG_CLASS = "SparkLineageIceberg"
NAMING_KEYS = ",".join(sorted(NAMING_OPTIONS))


class PlanDumper:
    """Plans and their leaves out of the JVM through `java/SparkLineagePlanDumper.java`."""

    def __init__(self, gateway: Any, compact: bool = True) -> None:
        """`compact=False`: plans as Spark's own `toJSON()` (the TPC-DS benchmark compares both)."""
        self.helper: Any = janino.optional_instance(gateway, DUMPER_CLASS, "actions are not captured")
        if self.helper is not None:
            self.helper.setNamingKeys(NAMING_KEYS)
            if not compact:
                self.helper.setCompact(False)

    @property
    def available(self) -> bool:
        return self.helper is not None

    def set_compact(self, compact: bool) -> None:
        """Plans as the compact dump writes them, or (False) as Spark's own `toJSON()`."""
        if self.helper is not None:
            self.helper.setCompact(compact)

    def to_json(self, tree: Any) -> str:
        """The plan's JSON alone."""
        if self.helper is None:
            raise janino.HelperUnavailable(DUMPER_CLASS)
        return str(janino.read_result(self.helper.dump(tree)))

    def describe(self, plan: Any) -> DescribedPlan:
        """Every leaf of `plan`, its subqueries and the plans cached DataFrames in it hold, in one
        round trip; a leaf the helper failed on carries an `error` (`DescribedPlan.errors`)."""
        if self.helper is None:
            raise janino.HelperUnavailable(DUMPER_CLASS)
        return _warned(parse_described_plan(str(janino.read_result(self.helper.describe(plan)))))


class WriteDescriber:
    """`java/SparkLineageWrites.java`, configured: `ActionDescriber` asks it for an action's write."""

    def __init__(self, gateway: Any) -> None:
        self.helper: Any = janino.optional_instance(gateway, WRITES_CLASS, "actions are not captured")
        if self.helper is not None:
            self.helper.setNamingKeys(NAMING_KEYS)


class ActionDescriber:
    """One callback's action out of the JVM in one round trip (`java/SparkLineageActions.java`):
    its plan's class, its QueryExecution id, the tagger's tags, its write, and the plan's
    description where the listener needs it (a write that is no wrapper command; a read when
    reads are emitted), written by the listener's `PlanDumper`."""

    def __init__(self, gateway: Any, writes: WriteDescriber, tagger: Any, wrappers: Iterable[str], emit_reads: bool) -> None:
        self.helper: Any = janino.optional_instance(gateway, ACTIONS_CLASS, "actions are not captured")
        if self.helper is not None:
            self.helper.setHelpers(writes.helper, tagger)
            self.helper.setWrappers(",".join(sorted(wrappers)))
            self.helper.setEmitReads(emit_reads)
            self.helper.setTableEvents(iceberg_events_recorded(gateway))

    @property
    def available(self) -> bool:
        return self.helper is not None

    def describe(self, query_execution: Any, dumper: PlanDumper, description: str | None = None) -> DescribedAction:
        """The action; its `write` is None when it writes nothing or the helper failed on the
        write (logged), its `plan` None when the helper was not to describe it. `description`:
        the helper's result the JVM already made (`QueryListenerRegistration`), else it is asked."""
        if self.helper is None or dumper.helper is None:
            raise janino.HelperUnavailable(ACTIONS_CLASS)
        if description is None:
            description = self.helper.describe(query_execution, dumper.helper)
        action = parse_described_action(str(janino.read_result(description)))
        if action.plan is not None:
            _warned(action.plan)
        return action

    @staticmethod
    def write_of(action: DescribedAction) -> WriteInfo | None:
        """The action's WriteInfo; None when it writes nothing or the helper failed on it (logged)."""
        if action.write is None:
            return None
        if "error" in action.write:
            log.warning("OpenLineage: the write %s was not described (%s)", action.write["command"], action.write["error"])
            return None
        return described_write(action.write)


def iceberg_events_recorded(gateway: Any) -> bool:
    """Whether Iceberg's scan and commit events are recorded for the actions' snapshots: the
    recorder (`java/SparkLineageIceberg.java`) is registered with Iceberg's listeners once per JVM,
    when Iceberg's runtime is on the driver's classpath."""
    recorder = janino.optional_instance(gateway, ICEBERG_CLASS, "Iceberg tables are versioned by their current snapshot")
    return recorder is not None and bool(recorder.install())


REGISTRATION_CLASS = "SparkLineageListenerRegistration"  # also how a cloned session shows it holds ours


class QueryListenerRegistration:
    """A Python QueryExecutionListener registered with a session's listener manager, and removed
    again by `unregister`. Spark holds a JVM object of ours that passes each callback on
    (`java/SparkLineageListenerRegistration.java`): py4j makes a new proxy each time a Python object
    crosses and the manager removes by identity, so `manager.unregister(listener)` from Python never
    matches. Without the helpers the listener is registered directly and stays for the session."""

    def __init__(
        self, gateway: Any, manager: Any, listener: Any, actions: ActionDescriber | None = None, dumper: PlanDumper | None = None
    ) -> None:
        """With `actions` and `dumper` (the batch listener's), the JVM describes each action
        before it calls the listener, and calls it only for actions it captures
        (`emitter.described.parse_listener_call`)."""
        self._helper = janino.optional_instance(gateway, REGISTRATION_CLASS, "registered for the session")
        if self._helper is None:
            manager.register(listener)
        elif actions is not None and actions.helper is not None and dumper is not None and dumper.helper is not None:
            self._helper.registerDescribed(manager, listener, actions.helper, dumper.helper)
        else:
            self._helper.register(manager, listener)

    def unregister(self) -> None:
        if self._helper is not None:
            self._helper.unregister()


def _warned(described: DescribedPlan) -> DescribedPlan:
    """`described`, each leaf the helper failed on logged."""
    for error in described.errors:
        log.warning("OpenLineage: a leaf of the plan was not described (%s)", error)
    return described


# scala collection helpers ----------------------------------------------------------------
def iterate(seq: Any) -> Iterator[Any]:
    iterator = seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


def option(value: Any) -> Any | None:
    return value.get() if value is not None and value.isDefined() else None


def naming_options(options: Any) -> dict[str, str]:
    """The dataset-naming keys (`naming.NAMING_OPTIONS`) of a Scala options map, nothing else
    (a streaming sink's write options)."""
    found = {}
    for key in sorted(NAMING_OPTIONS):
        value = option(options.get(key))
        if value is not None:
            found[key] = str(value)
    return found


def guarded(default: Any, call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - the JVM object lacks what we look for
        return default


def simple_class(obj: Any) -> str:
    return str(obj.getClass().getSimpleName())


def leaf_key(node: Any) -> int | None:
    output = node.output()
    if output.isEmpty():
        return None
    return int(output.head().exprId().id())


def leaves_with_subqueries(plan: Any) -> list[Any]:
    found = list(iterate(plan.collectLeaves()))
    for subquery in iterate(plan.subqueriesAll()):
        found += iterate(subquery.collectLeaves())
    return found
