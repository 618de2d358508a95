"""Attaching to a live SparkSession: the only package that imports pyspark / py4j.

`attach` returns an `Attachment` owning everything the session's lineage needs: its context
(settings, session facts, the application run), its wrapper-command dedupe, its pipeline thread
and transport client (`worker.PipelineWorker`), its batch `QueryExecutionListener`, its
streaming listener and its JVM micro-batch tagger. Sessions of one SparkContext
(`spark.newSession()`) attach independently. An attachment is built from a session object and
nothing else, and `close` undoes all it did: whatever else makes sessions can attach them the
same way.

It emits the parent application run START, and makes sure the application COMPLETE is emitted
and the transport flushed, with bounded waits, whether the script calls `spark.stop()` or
simply ends.

What is hooked outside the attachment, and undone:
- `SparkSession.stop` of the session's class is wrapped while any attachment lives, so the
  application run completes while the JVM is still up; the original is put back when the last
  attachment closes (`_ProcessHooks`).
- One `atexit` hook (`close_all`) while any attachment lives, unregistered with the last one.
- The session's `spark.sql.debug.maxToStringFields` is raised while attached (Spark truncates
  long field lists in plans beyond it) unless the user set it, or set
  `spark.openlineage.raiseMaxToStringFields=false`; `close` unsets it again.
- `install_auto_attach` (`python -m emitter run`, spark-submit's sitecustomize) wraps
  `SparkSession.Builder.getOrCreate`; `uninstall_auto_attach` puts it back.
The registry of live attachments (for `detach`, `settle` and the exit hook) is the only other
state kept here.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from emitter import pipeline
from emitter.capture import SessionInfo
from emitter.catalogs import CATALOG_PREFIX, CatalogInfo, configured_catalogs
from emitter.config import SPARK_CONF_KEYS, EmitterConfig, is_disabled, load_config
from emitter.dedupe import WrapperDedupe
from emitter.listener import janino
from emitter.listener.batch import BatchListener
from emitter.listener.jvm import QueryListenerRegistration
from emitter.listener.streaming import LineageStreamingListener
from emitter.listener.worker import PipelineWorker

log = logging.getLogger(__name__)

MAX_TO_STRING_FIELDS_KEY = "spark.sql.debug.maxToStringFields"
MAX_TO_STRING_FIELDS = "100000"  # Spark truncates field lists in plan JSON beyond this
TAGGER_CLASS = "SparkLineageMicroBatchTags"


class Attachment:
    """One SparkSession with the emitter attached; `close` is idempotent and bounded."""

    def __init__(self, spark: Any, context: pipeline.Context, client: Any) -> None:
        self.spark = spark
        self.context = context
        self.config = context.config
        self.client = client
        self.worker = PipelineWorker(context, client)
        self.dedupe = WrapperDedupe(emit_reads=context.config.emit_reads)
        gateway = spark.sparkContext._gateway
        # the JVM listener telling which actions ran inside which micro-batch (foreachBatch)
        self.tagger = janino.optional_instance(gateway, TAGGER_CLASS, "foreachBatch writes get the application as parent")
        self.listener = BatchListener(gateway, self.dedupe, self.worker, spark._jsc.hadoopConfiguration(), self.tagger)
        self.registration: QueryListenerRegistration | None = None
        self.streaming_listener: LineageStreamingListener | None = LineageStreamingListener(spark, self.worker.handle_stream)
        self.raised_max_to_string_fields = False
        self._closed = False
        self._lock = threading.Lock()

    def register(self) -> None:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self.spark.sparkContext._gateway)
        if self.tagger is not None:  # before the batch listener: it must hear of every action first
            try:
                self.spark.sparkContext._jsc.sc().addSparkListener(self.tagger)
            except Exception as error:  # noqa: BLE001 - foreachBatch writes get the application as parent
                log.warning("OpenLineage micro-batch tagger not registered: %s", error)
                self.tagger = self.listener.tagger = None
        self.registration = QueryListenerRegistration(
            self.spark.sparkContext._gateway,
            self.spark._jsparkSession.listenerManager(),
            self.listener,
            self.listener.actions,
            self.listener.dumper,
        )
        try:
            self.spark.streams.addListener(self.streaming_listener)
        except Exception as error:  # noqa: BLE001 - batch lineage still works
            log.warning("OpenLineage streaming listener not registered: %s", error)
            self.streaming_listener = None

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> None:
        """Raise maxToStringFields if wanted, emit the application START, register the listeners."""
        conf = self.spark.conf
        if self.config.raise_max_to_string_fields and conf.get(MAX_TO_STRING_FIELDS_KEY, None) is None:
            conf.set(MAX_TO_STRING_FIELDS_KEY, MAX_TO_STRING_FIELDS)
            self.raised_max_to_string_fields = True
        self.worker.start_application()
        self.register()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.wait_for_listener_bus()
            self.unregister()
            self.worker.handle_actions(self.dedupe.drain())  # nested writes whose wrapper never came
            if not self.worker.stop(self.config.close_timeout_s):
                log.warning("OpenLineage: events of some Spark actions were still being built at close")
            self.worker.complete_application()
        except Exception as error:  # noqa: BLE001
            log.warning("OpenLineage: application run not completed: %s", error)
        try:
            self.client.close(self.config.close_timeout_s)
        except Exception as error:  # noqa: BLE001
            log.warning("OpenLineage: transport not flushed: %s", error)
        if self.raised_max_to_string_fields:
            try:
                self.spark.conf.unset(MAX_TO_STRING_FIELDS_KEY)
            except Exception as error:  # noqa: BLE001 - the session is already stopped
                log.debug("%s not restored: %s", MAX_TO_STRING_FIELDS_KEY, error)

    def unregister(self) -> None:
        """No callbacks into a Python process that is going away (py4j would log connection errors)."""
        try:
            if self.registration is not None:
                self.registration.unregister()
        except Exception as error:  # noqa: BLE001
            log.debug("listener not unregistered: %s", error)
        if self.streaming_listener is not None:
            try:
                self.spark.streams.removeListener(self.streaming_listener)
            except Exception as error:  # noqa: BLE001
                log.debug("streaming listener not unregistered: %s", error)
        if self.tagger is not None:
            try:
                self.spark.sparkContext._jsc.sc().removeSparkListener(self.tagger)
            except Exception as error:  # noqa: BLE001
                log.debug("micro-batch tagger not unregistered: %s", error)

    def settle(self) -> bool:
        """Wait until every action Spark has reported so far has its events handed to the
        transport (delivery is the transport's business: `client.close` flushes it)."""
        self.wait_for_listener_bus()
        return self.worker.settle(self.config.close_timeout_s)

    def wait_for_listener_bus(self) -> None:
        """Let Spark deliver every pending callback (they run on the listener bus thread)."""
        spark_context = self.spark.sparkContext
        if spark_context._jsc is None:
            return
        try:
            spark_context._jsc.sc().listenerBus().waitUntilEmpty(self.config.listener_bus_timeout_ms)
        except Exception as error:  # noqa: BLE001 - a timeout: emit what we have
            log.warning("OpenLineage: Spark listener bus not drained: %s", error)


class _ProcessHooks:
    """What the emitter hooks process-wide while any attachment lives: the wrapped
    `SparkSession.stop` of each attached session's class and one exit hook; `remove` undoes both."""

    def __init__(self) -> None:
        self._original_stops: dict[type, Callable[..., Any]] = {}
        self._at_exit = False

    def install(self, spark: Any) -> None:
        session_class = type(spark)
        if session_class not in self._original_stops:
            original_stop = session_class.stop
            self._original_stops[session_class] = original_stop

            def stop(session: Any, *args: Any, **kwargs: Any) -> Any:
                close_session(session)
                return original_stop(session, *args, **kwargs)

            stop.__wrapped__ = original_stop  # type: ignore[attr-defined]
            session_class.stop = stop
        if not self._at_exit:
            atexit.register(close_all)
            self._at_exit = True

    @property
    def exit_hook_registered(self) -> bool:
        return self._at_exit

    def remove(self) -> None:
        for session_class, original_stop in self._original_stops.items():
            session_class.stop = original_stop  # type: ignore[attr-defined]
        self._original_stops.clear()
        if self._at_exit:
            atexit.unregister(close_all)
            self._at_exit = False


_attachments: dict[int, Attachment] = {}  # the live attachments, by session
_attach_lock = threading.RLock()
_hooks = _ProcessHooks()


def attach(spark: Any, config: EmitterConfig | Mapping[str, Any] | None = None) -> Attachment | None:
    """Attach the emitter to `spark`; never raises; None when disabled or on failure."""
    if is_connect_client(spark):  # no JVM here: nothing to attach to
        log.warning(CONNECT_CLIENT_MESSAGE)
        return None
    try:
        with _attach_lock:
            key = _session_key(spark)
            if key in _attachments:
                return _attachments[key]
            attachment = _attach(spark, config)
            if attachment is not None:
                _attachments[key] = attachment
                _hooks.install(spark)
            return attachment
    except Exception as error:  # noqa: BLE001
        log.warning("OpenLineage emitter not attached: %s", error)
        return None


def _session_key(spark: Any) -> int:
    return int(spark.sparkContext._gateway.jvm.System.identityHashCode(spark._jsparkSession))


def _attach(spark: Any, config: EmitterConfig | Mapping[str, Any] | None) -> Attachment | None:
    spark_conf = session_conf(spark)
    settings = load_config(spark_conf, config)
    if settings.disabled or is_disabled(spark_conf):  # env and conf win over an explicit EmitterConfig
        log.info("OpenLineage is disabled: nothing attached")
        return None
    client = make_client(settings)
    attachment = Attachment(spark, pipeline.new_context(settings, session_info(spark)), client)
    attachment.start()
    return attachment


def session_conf(spark: Any) -> dict[str, str]:
    """The session's `spark.openlineage.*` settings."""
    return {key: value for key in SPARK_CONF_KEYS if (value := spark.conf.get(key, None)) is not None}


CONNECT_CLIENT_MESSAGE = (
    "OpenLineage: this SparkSession is a Spark Connect client session: its lineage comes from the Connect server, "
    "which runs its actions, not from the client. Run the server with the emitter attached "
    "(`python -m emitter connect-server --port 15002`, see docs/emitter.md, Spark Connect); "
    "nothing is attached here and the program goes on."
)


def is_connect_client(spark: Any) -> bool:
    """Whether `spark` is a thin Spark Connect client session (no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_info(spark: Any) -> SessionInfo:
    spark_context = spark.sparkContext
    warehouse_dir = str(spark.conf.get("spark.sql.warehouse.dir", "") or "")
    return SessionInfo(
        app_name=str(spark_context.appName),
        app_id=str(spark_context.applicationId),
        spark_version=str(spark.version),
        master=str(spark_context.master),
        warehouse_dir=warehouse_dir,
        metastore_uri=spark.conf.get("spark.hadoop.hive.metastore.uris", None)
        or spark_context.getConf().get("spark.hadoop.hive.metastore.uris"),
        catalogs=_configured_catalogs(spark, warehouse_dir),
    )


def _configured_catalogs(spark: Any, warehouse_dir: str) -> tuple[CatalogInfo, ...]:
    """The catalogs the application's conf configures (one configured later, at run time, is named
    in facets without its type)."""
    conf = {str(key): str(value) for key, value in spark.sparkContext.getConf().getAll() if str(key).startswith(CATALOG_PREFIX)}
    implementation = str(spark.conf.get("spark.sql.catalogImplementation", "in-memory") or "in-memory")
    return configured_catalogs(conf, warehouse_dir, implementation)


def make_client(settings: EmitterConfig) -> Any:
    """openlineage-python's client, configured its own way (yml / env), with our kafka transport
    from a factory of our own (openlineage-python's default factory is left as it is)."""
    from openlineage.client import OpenLineageClient

    try:
        from emitter import transports

        factory = transports.factory()
    except Exception as error:  # noqa: BLE001 - our kafka transport is optional here
        log.debug("emitter.transports not available: %s", error)
        factory = None
    return OpenLineageClient(config=settings.client_config, factory=factory)


def close_session(spark: Any) -> None:
    if is_connect_client(spark):
        return
    try:
        with _attach_lock:
            attachment = _attachments.pop(_session_key(spark), None)
            if not _attachments:
                _hooks.remove()
        if attachment is not None:
            attachment.close()
    except Exception as error:  # noqa: BLE001
        log.warning("OpenLineage: closing failed: %s", error)


def settle_all() -> bool:
    """`Attachment.settle` for every live attachment; False when one timed out."""
    with _attach_lock:
        attachments = list(_attachments.values())
    return all([attachment.settle() for attachment in attachments])


def close_all() -> None:
    """Complete every attached application and flush (at exit, and the end of `python -m emitter run`)."""
    with _attach_lock:
        attachments = list(_attachments.values())
        _attachments.clear()
        _hooks.remove()
    for attachment in attachments:
        attachment.close()


def install_auto_attach(config: EmitterConfig | Mapping[str, Any] | None = None) -> None:
    """Wrap SparkSession.Builder.getOrCreate so every session it returns is attached."""
    from pyspark.sql import SparkSession

    original = SparkSession.Builder.getOrCreate
    if hasattr(original, "__wrapped__"):
        return

    def get_or_create(self: Any) -> Any:
        session = original(self)
        attach(session, config)
        return session

    get_or_create.__wrapped__ = original  # type: ignore[attr-defined]
    SparkSession.Builder.getOrCreate = get_or_create  # type: ignore[method-assign]


def uninstall_auto_attach() -> None:
    """Put back the SparkSession.Builder.getOrCreate that `install_auto_attach` wrapped."""
    from pyspark.sql import SparkSession

    original = getattr(SparkSession.Builder.getOrCreate, "__wrapped__", None)
    if original is not None:
        SparkSession.Builder.getOrCreate = original  # type: ignore[method-assign]
