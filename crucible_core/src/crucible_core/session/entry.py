"""The one call every kind of run goes through: prepare the request, then drive its lane."""

from __future__ import annotations

from pathlib import Path

from crucible_core import start_up
from crucible_core.lanes.lane import Ending
from crucible_core.plugins import Plugins
from crucible_core.run.state_lock import StateLock
from crucible_core.session.prepare import prepare
from crucible_core.session.request import SessionRequest, SessionResult
from crucible_core.session.shell import drive


def execute(plugins: Plugins, request: SessionRequest) -> SessionResult:
    """Run (or resume) what the request names; errors before the log exists propagate as CrucibleError.

    The state directory's lock is taken in prepare, before anything there is read or written,
    and released on every way out, so one interpreter can run sessions one after another.
    """
    locks: list[StateLock] = []

    def take_lock(state_dir: Path) -> StateLock:
        lock = StateLock.acquire(state_dir)
        locks.append(lock)
        return lock

    try:
        lane = prepare(plugins, request, take_lock)
        start_up.settle()  # the `crucible` process's start-up ends here (start_up.py)
        if isinstance(lane, Ending):
            return SessionResult(lane.outcome, lane.reason, lane.exit_code)
        assert locks, "a prepared lane holds its state directory's lock"
        return drive(plugins, lane, locks[-1], request.ui)
    finally:
        for lock in locks:
            lock.release()
