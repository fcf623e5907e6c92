"""SIGTERM to a standalone graph run (`crucible plan run`, a playbook): stop its services first.

Without this, SIGTERM ends the engine at once and the guard kills every child, services
included, so a tool that creates things outside (a cluster) cannot reclaim them until a
resume. With it, the first SIGTERM starts one thread that stops every service (signal, grace,
kill, each recorded as `service_exit`) and then ends the process exactly as SIGTERM would have
(status 143; the guard then reaps the tasks in flight); the log reads as a killed run, so
`--resume` continues it. A second SIGTERM while the services stop ends the process at once.
The keep/discard loop has its own SIGTERM handling (stop at the iteration head) and stops its
services on the way out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from crucible_core.services.runtime import ServiceRuntime


@contextlib.contextmanager
def services_stop_on_sigterm(runtime: ServiceRuntime | None) -> Iterator[None]:
    if runtime is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop_then_die() -> None:
        try:
            runtime.close()
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the default action now: end as SIGTERM does

    def handle(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        threading.Thread(target=stop_then_die, name="services-sigterm", daemon=True).start()

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)
