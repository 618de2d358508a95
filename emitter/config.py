"""Emitter settings: openlineage-python's own sources for the transport, `spark.openlineage.*` for the rest.

The transport is deliberately NOT parsed here: `OpenLineageClient` reads openlineage.yml /
OPENLINEAGE_CONFIG / OPENLINEAGE__TRANSPORT__* / OPENLINEAGE_URL itself, so we behave exactly
like every other openlineage-python integration. Only an explicit `transport` given to
`attach(spark, config=...)` is handed over as the client's user config.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from attrs import field, fields, frozen

SPARK_CONF_PREFIX = "spark.openlineage."
DEFAULT_NAMESPACE = "default"
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


def _as_bool(value: Any) -> bool:
    return str(value).strip().lower() in TRUE_WORDS


@frozen
class EmitterConfig:
    namespace: str = DEFAULT_NAMESPACE
    # `spark.openlineage.jobName`: replaces only the `{appName}` part of every action and streaming
    # job name, so each output keeps its own stable job: `{jobName}.{command}.{output}`.
    job_name: str | None = None
    # `spark.openlineage.fullJobName`: the whole name of every action run and streaming query of
    # the session. Meant for scripts with one output: distinct writes would share one job.
    full_job_name: str | None = None
    disabled: bool = False
    emit_reads: bool = False  # collect/count/show become runs with inputs only
    # `spark.openlineage.raiseMaxToStringFields`: raise the session's spark.sql.debug.maxToStringFields
    # while attached, unless the user set it (Spark truncates long field lists in plans beyond it)
    raise_max_to_string_fields: bool = True
    transport: Mapping[str, Any] | None = field(default=None)  # None: openlineage-python decides
    close_timeout_s: float = 10.0  # bound on flushing the transport at exit
    listener_bus_timeout_ms: int = 10_000  # bound on waiting for pending Spark callbacks at exit

    @property
    def client_config(self) -> dict[str, Any] | None:
        return {"transport": dict(self.transport)} if self.transport else None


# attach(config=...) keys and their spark.openlineage.* / env equivalents: the one list of them
_SPARK_KEYS = {
    "namespace": "namespace",
    "jobName": "job_name",
    "fullJobName": "full_job_name",
    "disabled": "disabled",
    "emitReads": "emit_reads",
    "raiseMaxToStringFields": "raise_max_to_string_fields",
    "closeTimeoutSeconds": "close_timeout_s",
}
SPARK_CONF_KEYS = tuple(SPARK_CONF_PREFIX + key for key in _SPARK_KEYS)  # what the listener reads off a session
_ENV_KEYS = {"OPENLINEAGE_NAMESPACE": "namespace", "OPENLINEAGE_DISABLED": "disabled"}
_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "disabled": _as_bool,
    "emit_reads": _as_bool,
    "raise_max_to_string_fields": _as_bool,
    "close_timeout_s": float,
    "listener_bus_timeout_ms": int,
}


def load_config(
    spark_conf: Mapping[str, str],
    explicit: EmitterConfig | Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> EmitterConfig:
    """Merge, lowest precedence first: environment, Spark conf, the `attach(config=...)` argument."""
    if isinstance(explicit, EmitterConfig):
        return explicit
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for env_key, attr_name in _ENV_KEYS.items():
        if environ.get(env_key):
            values[attr_name] = environ[env_key]
    for conf_key, attr_name in _SPARK_KEYS.items():
        if (value := spark_conf.get(SPARK_CONF_PREFIX + conf_key)) is not None:
            values[attr_name] = value
    for key, value in (explicit or {}).items():
        values[_SPARK_KEYS.get(key, key)] = value
    known = {attribute.name for attribute in fields(EmitterConfig)}
    return EmitterConfig(**{k: _CONVERTERS.get(k, _same)(v) for k, v in values.items() if k in known})


def _same(value: Any) -> Any:
    return value


def is_disabled(spark_conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return _as_bool(environ.get("OPENLINEAGE_DISABLED", "")) or _as_bool(spark_conf.get(SPARK_CONF_PREFIX + "disabled", ""))
