"""Attaching to a live SparkSession: the only package that imports pyspark / py4j.

`attach` returns an `Attachment` owning everything the session's lineage needs: its pipeline
(fed from its own thread, `worker.PipelineWorker`) and transport client, its batch
`QueryExecutionListener`, its streaming listener and its JVM micro-batch tagger. Sessions of one
SparkContext (`spark.newSession()`) attach independently.
It emits the parent application run START, and makes sure the application COMPLETE is emitted
and the transport flushed, with bounded waits, whether the script calls `spark.stop()` or
simply ends. The registry of live attachments is the only state kept here, for shutdown.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Mapping
from typing import Any

from emitter.capture import SessionInfo
from emitter.config import EmitterConfig, is_disabled, load_config
from emitter.listener import janino
from emitter.listener.batch import BatchListener
from emitter.listener.streaming import LineageStreamingListener
from emitter.listener.worker import PipelineWorker
from emitter.pipeline import Pipeline

log = logging.getLogger(__name__)

MAX_TO_STRING_FIELDS = "100000"  # Spark truncates field lists in plan JSON beyond this
_CONF_KEYS = (
    "spark.openlineage.namespace",
    "spark.openlineage.jobName",
    "spark.openlineage.fullJobName",
    "spark.openlineage.disabled",
    "spark.openlineage.emitReads",
    "spark.openlineage.closeTimeoutSeconds",
)


TAGGER_CLASS = "SparkLineageMicroBatchTags"


class Attachment:
    """One SparkSession with the emitter attached; `close` is idempotent and bounded."""

    def __init__(self, spark: Any, pipeline: Pipeline, client: Any) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.client = client
        self.worker = PipelineWorker(pipeline)
        gateway = spark.sparkContext._gateway
        # the JVM listener telling which actions ran inside which micro-batch (foreachBatch)
        self.tagger = janino.optional_instance(gateway, TAGGER_CLASS, "foreachBatch writes get the application as parent")
        self.listener = BatchListener(gateway, self.worker, spark._jsc.hadoopConfiguration(), self.tagger)
        self.streaming_listener: LineageStreamingListener | None = LineageStreamingListener(spark, self.worker.handle_stream)
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
        self.spark._jsparkSession.listenerManager().register(self.listener)
        try:
            self.spark.streams.addListener(self.streaming_listener)
        except Exception as error:  # noqa: BLE001 - batch lineage still works
            log.warning("OpenLineage streaming listener not registered: %s", error)
            self.streaming_listener = None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.wait_for_listener_bus()
            self.unregister()
            if not self.worker.stop(self.pipeline.config.close_timeout_s):
                log.warning("OpenLineage: events of some Spark actions were still being built at close")
            self.pipeline.complete_application()
        except Exception as error:  # noqa: BLE001
            log.warning("OpenLineage: application run not completed: %s", error)
        try:
            self.client.close(self.pipeline.config.close_timeout_s)
        except Exception as error:  # noqa: BLE001
            log.warning("OpenLineage: transport not flushed: %s", error)

    def unregister(self) -> None:
        """No callbacks into a Python process that is going away (py4j would log connection errors)."""
        try:
            self.spark._jsparkSession.listenerManager().unregister(self.listener)
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
        return self.worker.settle(self.pipeline.config.close_timeout_s)

    def wait_for_listener_bus(self) -> None:
        """Let Spark deliver every pending callback (they run on the listener bus thread)."""
        spark_context = self.spark.sparkContext
        if spark_context._jsc is None:
            return
        try:
            spark_context._jsc.sc().listenerBus().waitUntilEmpty(self.pipeline.config.listener_bus_timeout_ms)
        except Exception as error:  # noqa: BLE001 - a timeout: emit what we have
            log.warning("OpenLineage: Spark listener bus not drained: %s", error)


_attachments: dict[int, Attachment] = {}  # the live attachments, by session, for shutdown
_attach_lock = threading.RLock()


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
    attachment = start_attachment(spark, settings, session_info(spark), make_client(settings))
    _close_on_stop(spark)
    atexit.register(attachment.close)
    return attachment


def session_conf(spark: Any) -> dict[str, str]:
    """The session's `spark.openlineage.*` settings."""
    return {key: value for key in _CONF_KEYS if (value := spark.conf.get(key, None)) is not None}


def start_attachment(spark: Any, settings: EmitterConfig, info: SessionInfo, client: Any) -> Attachment:
    """Emit the application START of `spark` and register its listeners."""
    spark.conf.set("spark.sql.debug.maxToStringFields", MAX_TO_STRING_FIELDS)
    pipeline = Pipeline(settings, info, client)
    pipeline.start_application()
    attachment = Attachment(spark, pipeline, client)
    attachment.register()
    return attachment


CONNECT_CLIENT_MESSAGE = (
    "OpenLineage: this SparkSession is a Spark Connect client session: its lineage comes from the Connect server, "
    "which runs its actions, not from the client. Run the server with the emitter attached "
    "(`python -m emitter connect-server --port 15002`, see the README's Spark Connect section); "
    "nothing is attached here and the program goes on."
)


def is_connect_client(spark: Any) -> bool:
    """Whether `spark` is a thin Spark Connect client session (no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_info(spark: Any) -> SessionInfo:
    spark_context = spark.sparkContext
    return SessionInfo(
        app_name=str(spark_context.appName),
        app_id=str(spark_context.applicationId),
        spark_version=str(spark.version),
        master=str(spark_context.master),
        warehouse_dir=str(spark.conf.get("spark.sql.warehouse.dir", "") or ""),
        metastore_uri=spark.conf.get("spark.hadoop.hive.metastore.uris", None)
        or spark_context.getConf().get("spark.hadoop.hive.metastore.uris"),
    )


def make_client(settings: EmitterConfig) -> Any:
    """openlineage-python's client, configured its own way (yml / env), with our kafka transport."""
    try:
        from emitter import transports

        transports.register()
    except Exception as error:  # noqa: BLE001 - our kafka transport is optional here
        log.debug("emitter.transports not registered: %s", error)
    from openlineage.client import OpenLineageClient

    return OpenLineageClient(config=settings.client_config)


def _close_on_stop(spark: Any) -> None:
    """Wrap SparkSession.stop (once, class-wide) so the app run completes while the JVM is up."""
    session_class = type(spark)
    original_stop = session_class.stop
    if hasattr(original_stop, "__wrapped__"):
        return

    def stop(self: Any, *args: Any, **kwargs: Any) -> Any:
        close_session(self)
        return original_stop(self, *args, **kwargs)

    stop.__wrapped__ = original_stop  # type: ignore[attr-defined]
    session_class.stop = stop


def close_session(spark: Any) -> None:
    if is_connect_client(spark):
        return
    try:
        with _attach_lock:
            attachment = _attachments.pop(_session_key(spark), None)
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
    """Complete every attached application and flush (the end of `python -m emitter run`)."""
    with _attach_lock:
        attachments = list(_attachments.values())
        _attachments.clear()
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
