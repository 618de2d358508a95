"""Transports: how OpenLineage events leave the driver.

Contract (what a transport here must implement)
-----------------------------------------------
A transport is an openlineage-python ``Transport`` subclass, so the client builds it from
the usual configuration (``openlineage.yml``, ``OPENLINEAGE_CONFIG``,
``OPENLINEAGE__TRANSPORT__*``) through the transport factory:

* ``kind``: the name users write as ``transport.type``;
* ``config_class``: an openlineage-python ``Config`` whose ``from_dict`` accepts the
  parameters as they arrive from YAML *or* from environment variables (the client
  lower-cases env var keys and JSON-decodes their values, so ``messageKey`` arrives as
  ``messagekey`` and ``"5"`` as ``5``);
* ``emit(event)``: called on the Spark driver thread. It must return at once and never
  raise: serialization and network I/O happen on a background sender;
* ``close(timeout)``: flush what is pending for at most ``timeout`` seconds (negative:
  the transport's own bound), persist what could not be delivered, return ``True`` only
  when everything was delivered.

Every event is serialized by :func:`emitter.transports.records.serialize` (one pass, orjson),
also in openlineage-python's file, HTTP and console transports when the emitter builds the
client (:mod:`emitter.transports.standard`). Inside a transport of ours, the event is turned
into ``(key, value bytes)`` once (:mod:`emitter.transports.records`); the part that talks to the network sees only those
plain records, which is what lets undelivered events wait in an on-disk spool
(:mod:`emitter.transports.spool`) and be sent later, possibly by another process.

Registry
--------
:data:`TRANSPORTS` maps transport types to dotted class paths, imported only when a client
is built with that type (kafka-python is imported only if ``kafka`` is used).
:func:`factory` is a transport factory of our own: openlineage-python's defaults plus ours,
overriding the built-in ``kafka`` transport (which needs confluent-kafka); the emitter hands
it to the ``OpenLineageClient`` it builds, so openlineage-python's process-wide default
factory is left as it is. :func:`register` changes that default factory, for scripts that
build their own client (a composite transport's children are built by the default factory).
"""

from __future__ import annotations

import importlib
from typing import Any

TRANSPORTS: dict[str, str] = {
    "kafka": "emitter.transports.kafka.KafkaTransport",
}


class TransportRegistryError(ImportError):
    """A registered transport type points at something that is not a loadable Transport class."""


def transport_class(kind: str) -> type:
    """The Transport class registered under `kind`, imported now."""
    try:
        dotted_path = TRANSPORTS[kind]
    except KeyError:
        known = ", ".join(sorted(TRANSPORTS))
        raise TransportRegistryError(f"no transport registered under type {kind!r} (known: {known})") from None
    module_name, _, class_name = dotted_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise TransportRegistryError(
            f"transport {kind!r}: cannot import module {module_name!r} ({error}); "
            "is the `emitter` extra installed (pip install 'spark-lineage[emitter]')?"
        ) from error
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise TransportRegistryError(f"transport {kind!r}: {dotted_path!r} is not a class")
    return found


def factory() -> Any:
    """A new openlineage-python transport factory: its default transports, ours over them, and
    its file, HTTP and console transports serializing with `records.serialize`
    (:mod:`emitter.transports.standard`)."""
    from openlineage.client.transport import DefaultTransportFactory, get_default_factory

    from emitter.transports.standard import SERIALIZING_TRANSPORTS

    own = DefaultTransportFactory()
    own.transports.update(get_default_factory().transports)
    for kind, dotted_path in {**SERIALIZING_TRANSPORTS, **TRANSPORTS}.items():
        own.register_transport(kind, dotted_path)
    return own


def register() -> None:
    """Register our transports in openlineage-python's default factory (idempotent; process-wide:
    the emitter itself uses `factory` instead).

    Dotted strings are registered, so nothing heavy is imported until a client is
    actually configured with that transport type.
    """
    from openlineage.client.transport import get_default_factory

    default = get_default_factory()
    for kind, dotted_path in TRANSPORTS.items():
        default.register_transport(kind, dotted_path)


__all__ = ["TRANSPORTS", "TransportRegistryError", "factory", "register", "transport_class"]
