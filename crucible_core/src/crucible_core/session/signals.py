"""One signal policy for every kind of run: the first Ctrl-C or SIGTERM stops gracefully, the second aborts.

What "gracefully" means is the lane's (the loop stops at its next iteration head, a plan
dispatches nothing new and lets what runs settle); the session only counts. A graph with task
runners open aborts on the first one, as a plan always did there: its attempts running on a
cluster are cancelled (their Jobs deleted) rather than left behind by a process being stopped. An operator's
abort from the control bridge (another thread) reaches the main thread as SIGUSR1, which
interrupts it only where the lane says it may be interrupted.

Both handlers stay installed until the session has written its last line: once an abort is
under way, a further signal is told it is already happening instead of cutting the shutdown
short. Off the main thread (an embedding caller) nothing is installed, and the previous
handlers are always put back, so the session leaves the process as it found it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from crucible_core.control.inbox import Inbox
from crucible_core.run.gates import Aborted


def signal_name(signum: int) -> str:
    name = signal.Signals(signum).name
    return "Ctrl-C (SIGINT)" if signum == signal.SIGINT else name


def tell_operator(text: str) -> None:
    """One line on standard error, outside the log (the console's live table makes room for it)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # nobody is reading stderr any more
        pass


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class SignalPolicy:
    """SIGINT/SIGTERM: the first asks the lane to stop at its next safe point (`request_stop`,
    which must not write the log: a signal handler runs between any two bytecodes), the next
    ones raise KeyboardInterrupt (abort now), until the shell writes its closing lines."""

    def __init__(
        self, request_stop: Callable[[str], None], graceful: str, aborts: Callable[[], bool] = lambda: False
    ) -> None:
        self.request_stop = request_stop
        self.graceful = graceful  # what the first one does, for the operator
        # Whether even the first one aborts now: attempts running elsewhere (a cluster's Jobs)
        # cannot be waited on by a process that is itself being stopped, so they are cancelled.
        self.aborts = aborts
        self.count = 0
        self.closing = False  # the shell is writing its last lines: nothing may interrupt it
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> SignalPolicy:
        if _main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum: int, _frame: Any) -> None:
        self.count += 1
        name = signal_name(signum)
        if self.closing:
            tell_operator(f"crucible: {name}: the run is already ending; its log is being closed")
            return
        if self.count > 1 or self.aborts():
            tell_operator(f"crucible: {name}{' again' if self.count > 1 else ''}: aborting now")
            raise KeyboardInterrupt
        self.request_stop(f"received {name}")
        # The log says so when the stop takes effect, which can be a whole agent turn away;
        # the person who pressed Ctrl-C hears back now (a signal handler must not write the log).
        tell_operator(
            f"crucible: {name}: {self.graceful} "
            f"({'Ctrl-C' if signum == signal.SIGINT else 'the signal'} again aborts now)"
        )

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()


class AbortSignal:
    """An abort from the bridge thread interrupts the main thread via SIGUSR1, when `interruptible()`.

    Anywhere else the lane notices the abort at its next safe point.
    """

    def __init__(self, inbox: Inbox, interruptible: Callable[[], bool]) -> None:
        self.inbox = inbox
        self.interruptible = interruptible
        self.previous: Any = None
        self.installed = False

    def __enter__(self) -> AbortSignal:
        if not _main_thread():  # an embedding caller: aborts wait for a safe point
            return self
        self.previous = signal.signal(signal.SIGUSR1, self.handle)
        self.installed = True
        self.inbox.on_abort = lambda: os.kill(os.getpid(), signal.SIGUSR1)
        return self

    def handle(self, _signum: int, _frame: Any) -> None:
        if self.interruptible() and self.inbox.abort_requested:
            raise Aborted

    def disarm(self) -> None:
        """The run is ending: an abort arriving now must not cut the closing lines short."""
        self.inbox.on_abort = None
        self.interruptible = lambda: False

    def __exit__(self, *exc: object) -> None:
        self.inbox.on_abort = None
        if self.installed:
            signal.signal(signal.SIGUSR1, self.previous)
            self.installed = False
