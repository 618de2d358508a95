"""Spark Connect, server side: every client session of a Connect server is an attachment of its own.

A Connect server runs each client's actions in a server-side SparkSession of that client
(`SparkConnectSessionManager` makes one per user id and session id with `newSession()`), so
the listeners of the server's own session never hear of them. `ConnectSessions` watches the
listener bus (through `java/SparkLineageConnectSessions.java`) for the first operation of each
client session, and attaches to the session while that event is delivered: the session's
`QueryExecutionListener` bus sits on the same listener-bus queue, after it, so the operation's
actions already find the listeners registered. Not at session start: the client applies its
builder's settings (`.appName`, `.config`) just after the session is made.

Each client session's attachment reads its settings from that session's conf (what the client
set with `.config(...)` / `spark.conf.set`, over the server's `--conf` and environment):
`spark.openlineage.namespace`, `jobName`, `fullJobName`, `disabled`, `emitReads`, and
`spark.app.name` for its job names. Its runs carry the `sparkConnectSession` run facet (session
id, user id). Every session shares the server's one transport client, closed at shutdown.

The session a `foreachBatch` function writes through (the streaming query's clone of the
client's session) already holds the client session's listeners, cloned with it: it is not
attached again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from attrs import evolve

from emitter import pipeline
from emitter.capture import ConnectSession
from emitter.config import EmitterConfig, is_disabled, load_config
from emitter.listener import Attachment, janino, make_client, session_conf, session_info
from emitter.listener.jvm import REGISTRATION_CLASS

log = logging.getLogger(__name__)

WATCHER_CLASS = "SparkLineageConnectSessions"
SERVICE_OBJECT = "org.apache.spark.sql.connect.service.SparkConnectService$"  # Scala object: its MODULE$
DEFAULT_APP_NAME = "spark_connect"  # a client session that names no app, on a server that names none


class SharedClient:
    """The server's transport client as a session's attachment sees it: closing a session
    leaves the transport open for the others (`ConnectSessions.close` closes it)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def emit(self, event: Any) -> None:
        self.client.emit(event)

    def close(self, timeout: float = -1.0) -> bool:
        return True


class ConnectSessions:
    """Attaches the emitter to every Spark Connect session of the server running in `spark`'s JVM.

    Implements `java.util.function.Consumer` for py4j: the JVM watcher calls `accept` on the
    listener bus thread with "started" or "closed", the user id and the session id.
    """

    class Java:
        implements = ["java.util.function.Consumer"]

    def __init__(self, spark: Any, config: EmitterConfig | Mapping[str, Any] | None = None) -> None:
        self.spark = spark  # the server's own (classic) session
        self.explicit = config
        self.gateway = spark.sparkContext._gateway
        self.client = make_client(load_config(session_conf(spark), config))
        self.shared_client = SharedClient(self.client)
        self.watcher = janino.new_instance(self.gateway, WATCHER_CLASS)
        self.attachments: dict[tuple[str, str], Attachment] = {}  # (user id, session id) -> its attachment
        self.emitted_events = 0  # by the sessions closed so far
        self._closing: list[threading.Thread] = []  # attachments of ended sessions being closed
        self._lock = threading.Lock()
        self._closed = False

    def register(self) -> None:
        """Start hearing of Connect sessions (before the Connect service accepts clients)."""
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(self.gateway)
        self.watcher.setSink(self)
        self.spark.sparkContext._jsc.sc().addSparkListener(self.watcher)

    # on the listener bus ------------------------------------------------------------------
    def accept(self, message: str) -> None:
        try:
            kind, user_id, session_id = str(message).split("\0")
            if kind == "started":
                self._attach(user_id, session_id)
            elif kind == "closed":
                self._detach(user_id, session_id)
        except Exception as error:  # noqa: BLE001 - never disturb the server
            log.warning("OpenLineage: Spark Connect session event not handled: %s", error)

    def _attach(self, user_id: str, session_id: str) -> None:
        with self._lock:
            if self._closed or (user_id, session_id) in self.attachments:
                return
        jsession = self._server_session(user_id, session_id)
        if jsession is None or self._holds_our_listener(jsession):
            return
        attachment = attach_session(self.wrap(jsession), ConnectSession(session_id, user_id), self.shared_client, self.explicit)
        if attachment is None:
            return
        with self._lock:
            self.attachments[(user_id, session_id)] = attachment
        if attachment.streaming_listener is not None:  # the first operation may have started a query
            attachment.streaming_listener.catch_up()
        log.info("OpenLineage: attached to Spark Connect session %s of user %s", session_id, user_id)

    def _detach(self, user_id: str, session_id: str) -> None:
        with self._lock:
            attachment = self.attachments.pop((user_id, session_id), None)
        if attachment is None:
            return
        # closing waits for the listener bus to drain: not on the bus thread itself
        closing = threading.Thread(target=self._close, args=(attachment,), name="openlineage-connect-close", daemon=True)
        with self._lock:
            self._closing = [thread for thread in self._closing if thread.is_alive()]
            self._closing.append(closing)
        closing.start()

    def _server_session(self, user_id: str, session_id: str) -> Any | None:
        """The server-side SparkSession of a client session (None when already gone)."""
        jvm = self.gateway.jvm
        service = jvm.java.lang.Class.forName(SERVICE_OBJECT).getField("MODULE$").get(None)
        key = jvm.org.apache.spark.sql.connect.service.SessionKey(user_id, session_id)
        holder = service.sessionManager().getIsolatedSessionIfPresent(key)
        return holder.get().session() if holder.isDefined() else None

    def _holds_our_listener(self, jsession: Any) -> bool:
        """Whether a session already has one of our batch listeners (a clone of an attached session).
        Told by the JVM class that holds ours: asking another Python listener its name would call
        into Python, where it may have none."""
        listeners = jsession.listenerManager().listListeners()
        return any(listener.getClass().getName() == REGISTRATION_CLASS for listener in listeners)

    def wrap(self, jsession: Any) -> Any:
        """A PySpark session object over a server-side JVM session."""
        from pyspark.sql import SparkSession

        return SparkSession(self.spark.sparkContext, jsession)

    # waiting and closing ------------------------------------------------------------------
    def _close(self, attachment: Attachment) -> None:
        attachment.close()
        with self._lock:
            self.emitted_events += attachment.worker.emitted_events

    def settle(self) -> bool:
        """`Attachment.settle` of every attached session; False when one timed out."""
        with self._lock:
            attachments = list(self.attachments.values())
        return all([attachment.settle() for attachment in attachments])

    def close(self) -> None:
        """Complete every session's application run and close the transport; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            attachments = list(self.attachments.values())
            self.attachments.clear()
            closing = list(self._closing)
        try:
            self.spark.sparkContext._jsc.sc().removeSparkListener(self.watcher)
        except Exception as error:  # noqa: BLE001
            log.debug("Connect session watcher not removed: %s", error)
        for attachment in attachments:
            self._close(attachment)
        close_timeout = load_config(session_conf(self.spark), self.explicit).close_timeout_s
        for thread in closing:
            thread.join(close_timeout)
        try:
            self.client.close(close_timeout)
        except Exception as error:  # noqa: BLE001
            log.warning("OpenLineage: transport not flushed: %s", error)


def attach_session(
    spark: Any, connect: ConnectSession, client: Any, explicit: EmitterConfig | Mapping[str, Any] | None = None
) -> Attachment | None:
    """Attach to one client session on the server: its own settings, app name and session facet;
    None when the client (or the server) disabled lineage for it."""
    spark_conf = session_conf(spark)
    settings = load_config(spark_conf, explicit)
    if settings.disabled or is_disabled(spark_conf):
        log.info("OpenLineage is disabled for Spark Connect session %s", connect.session_id)
        return None
    app_name = spark.conf.get("spark.app.name", None) or DEFAULT_APP_NAME
    info = evolve(session_info(spark), app_name=app_name, connect=connect)
    attachment = Attachment(spark, pipeline.new_context(settings, info), client)
    attachment.start()
    return attachment
