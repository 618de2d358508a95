"""Zero-code attach under spark-submit: `PYTHONPATH=$(python -m emitter pythonpath) spark-submit job.py`.

Python imports `sitecustomize` at start-up. spark-submit keeps PYTHONPATH for the driver and sets
PYSPARK_GATEWAY_PORT there only, so Python workers on executors are left alone.
"""

import os

if os.environ.get("PYSPARK_GATEWAY_PORT") and os.environ.get("OPENLINEAGE_DISABLED", "").lower() != "true":
    try:
        from emitter import listener

        listener.install_auto_attach()
    except Exception as error:  # noqa: BLE001 - never break the job
        import logging

        logging.getLogger("emitter").warning("OpenLineage auto-attach failed: %s", error)
