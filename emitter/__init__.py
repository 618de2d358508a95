"""OpenLineage emitter for Apache Spark: `attach(spark)` to a session, or `python -m emitter run job.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emitter.config import EmitterConfig
    from emitter.listener import Attachment

__all__ = ["attach", "detach", "settle"]


def attach(spark: Any, config: EmitterConfig | Mapping[str, Any] | None = None) -> Attachment | None:
    """Emit OpenLineage events for every write `spark` runs. Never raises; idempotent; None when
    disabled (OPENLINEAGE_DISABLED=true or spark.openlineage.disabled=true) or on failure."""
    try:
        from emitter import listener
    except Exception as error:  # noqa: BLE001 - pyspark missing or broken: the job goes on
        import logging

        logging.getLogger(__name__).warning("OpenLineage emitter not attached: %s", error)
        return None
    return listener.attach(spark, config)


def detach(spark: Any) -> None:
    """Complete the application run of `spark`'s attachment, flush its transport and stop
    emitting for that session (other attached sessions go on); never raises."""
    try:
        from emitter import listener
    except Exception:  # noqa: BLE001 - nothing can have been attached
        return
    listener.close_session(spark)


def settle() -> bool:
    """Wait until the actions every attached session ran so far have their events handed to
    the transport (they are built on a thread of their own, off Spark's listener bus); bounded
    by the close timeout; False when it ran out. Never raises."""
    try:
        from emitter import listener

        return listener.settle_all()
    except Exception:  # noqa: BLE001 - pyspark missing: nothing can have been attached
        return True
