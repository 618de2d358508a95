"""A stand-in application for spool tests: emits one application's events through an
OpenLineageClient configured only by OPENLINEAGE__* env vars, prints their identities as
JSON, and exits — without closing the client unless --close is given (then the
transport's exit hook must deliver or spool them). With --last-at-exit the final event is
emitted by an exit hook registered after the client, and nothing closes the client.

    python -m tests.transports.emit_app APP_NAME ACTIONS [--close] [--last-at-exit]
"""

from __future__ import annotations

import atexit
import json
import sys
import time

from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde

import emitter.transports
from tests.transports.lineage_events import application_events, identity


def main(argv: list[str]) -> int:
    app_name, actions = argv[0], int(argv[1])
    emitter.transports.register()
    client = OpenLineageClient()
    events = application_events(app_name, actions)
    at_exit = events[-1:] if "--last-at-exit" in argv else []
    for event in events[: len(events) - len(at_exit)]:
        client.emit(event)
    print(json.dumps([identity(json.loads(Serde.to_json(event))) for event in events]))
    sys.stdout.flush()
    if at_exit:
        time.sleep(1)  # let the sender thread create its producer (and any exit hook that comes with it)
        atexit.register(client.emit, at_exit[0])  # nobody closes the client: the transport's exit hook must
    if "--close" in argv:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
