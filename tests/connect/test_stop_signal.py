"""`python -m emitter connect-server` ends on SIGTERM even when the kernel delivers the signal to
another of its threads (py4j's callback server, the gateway's): its main thread must not wait
where Python cannot run the handler."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.support.paths import PROJECT_ROOT

WAITER = textwrap.dedent(
    """
    import signal, threading, time
    from emitter.listener.connect_server import stop_requested, wait_until_set

    stopping = stop_requested()

    def signal_this_thread():
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # delivered to this thread, not the main one
        time.sleep(60)  # the thread lives on, as py4j's do

    threading.Thread(target=signal_this_thread, daemon=True).start()
    wait_until_set(stopping)
    print("stopped", flush=True)
    """
)


def test_a_sigterm_delivered_to_another_thread_ends_the_wait():
    completed = subprocess.run(
        [sys.executable, "-c", WAITER], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )
    assert (completed.returncode, completed.stdout.strip()) == (0, "stopped"), completed.stderr[-2000:]
