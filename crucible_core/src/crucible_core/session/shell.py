"""The session shell: what every kind of run gets the same way, around the body its lane supplies.

Once a request is prepared (session/prepare.py), `drive` opens the session log with one
redactor, adds the reporter `--ui` chose and every plugin's `crucible_session_event`, opens the
services, admission ledger and control bridge, installs one signal policy, and runs the lane.
On every way out (normal end, error, operator stop, signal, a plugin's internal error) it then
closes in one order: the bridge, the lifecycle's run end, the services (each `service_exit`
written), the lane's runners, the lane's summary, `finished`, and `shutdown` as the last line.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, TextIO

from crucible_core.broker.declaration import Disclosure
from crucible_core.broker.service import TurnBroker
from crucible_core.contract import wire
from crucible_core.control import orders
from crucible_core.control.bridge import ControlBridge
from crucible_core.control.inbox import Inbox
from crucible_core.control.ledger import Ledger
from crucible_core.errors import CrucibleError, ExitCode
from crucible_core.lanes.lane import Ending, Lane, Shell
from crucible_core.plugins import Plugins
from crucible_core.protocols import Publisher, Reporter, ReporterContext, ReporterFactory
from crucible_core.redact import Redactor
from crucible_core.reporters.console import console_choice, is_terminal
from crucible_core.run.artifact_collection import ArtifactCollection
from crucible_core.run.gates import Aborted
from crucible_core.run.lifecycle import Lifecycle, RunContext
from crucible_core.run.observers import ObserverFanout
from crucible_core.run.state_lock import StateLock
from crucible_core.session.request import SessionResult
from crucible_core.session.signals import AbortSignal, SignalPolicy
from crucible_core.session_log import SessionLog

if TYPE_CHECKING:  # loaded where a run declares services
    from crucible_core.services.runtime import ServiceRuntime


def make_reporter(
    plugins: Plugins, name: str, iterations: int | None, stream: TextIO | None = None
) -> Reporter:
    """The reporter `--ui NAME` names, showing progress on `stream` (standard error by default)."""
    stream = sys.stderr if stream is None else stream
    reporters = plugins.registry("reporter")
    chosen = console_choice(reporters, name, on_terminal=is_terminal(stream))
    factory: ReporterFactory = reporters.get(chosen, where="--ui")
    return factory(ReporterContext(stream=stream, iterations=iterations))


def redactor_for(lane: Lane) -> Redactor:
    """One redactor, built the same way for every lane: the values handed out in [agent].env, the
    engine environment's secret-named or key-shaped values, and the services' secrets."""
    redactor = Redactor()
    redactor.add_env(lane.agent_env)
    redactor.add_engine_env(lane.engine_env)
    redactor.add(lane.planned.secret_values(os.environ))  # a service's secrets: never in the log either
    return redactor


class _Hooks:
    """The run's lifecycle, made once (the lane decides when, and with which broker)."""

    def __init__(
        self,
        plugins: Plugins,
        lane: Lane,
        services: ServiceRuntime | None,
        log: SessionLog,
        redactor: Redactor,
    ) -> None:
        self.plugins = plugins
        self.lane = lane
        self.services = services
        self.log = log
        self.redactor = redactor
        self.made: Lifecycle | None = None

    def make(
        self, broker: TurnBroker | None, disclosure: Disclosure | None, publisher: Publisher | None = None
    ) -> Lifecycle:
        assert self.made is None, "a run has one lifecycle"
        lane, paths = self.lane, self.lane.paths
        context = RunContext(
            lane.manifest,
            paths.workspace,
            paths.state_dir,
            paths.private_dir,
            lane.run_id,
            lane.resumed,
            broker,
            self.services,
            lane=lane.kind,
            note=self._say,
            engine_env=lane.engine_env,
            publisher=publisher,
            emit=self.log.emit,
        )
        declared = lane.manifest.manifest.workspace.artifact if lane.manifest is not None else ()
        artifacts = (
            ArtifactCollection(
                paths.workspace,
                declared,
                paths.private_dir,
                redact=self.redactor.text,
                emit=self.log.emit,
                note=self._note,
            )
            if declared
            else None
        )
        self.made = Lifecycle(
            self.plugins,
            context,
            note=self._note,
            disclosure=disclosure,
            artifacts=artifacts,
        )
        return self.made

    def _note(self, text: str) -> None:
        self._say(text, "warn")

    def _say(self, text: str, level: str) -> None:
        self.log.emit(wire.Note(msg=text, level=level))

    def run_end(self, ending: Ending, iterations: int) -> None:
        if self.made is not None:
            self.made.run_end(ending.outcome, ending.reason, iterations)


def drive(plugins: Plugins, lane: Lane, lock: StateLock, ui: str) -> SessionResult:
    """Run a prepared lane from its first log line to its shutdown; the result says how it ended."""
    paths = lane.paths
    redactor = redactor_for(lane)
    log = SessionLog(paths.session_log, redactor)
    reporter = make_reporter(plugins, ui, lane.reporter_total)
    fanout = ObserverFanout(note=lambda text: log.emit(wire.Note(msg=text, level="warn")))
    fanout.add(f"reporter {ui!r}", reporter.on_event)
    fanout.add_plugins(plugins, "crucible_session_event")
    log.observers.append(fanout)
    ledger = Ledger(paths.admissions, redact=redactor.obj)
    inbox = Inbox()
    bridge = ControlBridge(ledger, inbox, honours=lane.honours, lane=lane.kind)
    services = lane.planned.open(state_dir=paths.state_dir, emit=log.emit, run_id=lane.run_id)
    hooks = _Hooks(plugins, lane, services, log, redactor)
    shell = Shell(
        log=log,
        redactor=redactor,
        inbox=inbox,
        ledger=ledger,
        services=services,
        state_guards=(
            lambda: "the state lock" if lock.reassert() else None,
            ledger.restore_if_damaged,
            bridge.restore_record,
        ),
        lifecycle=hooks.make,
    )
    try:
        lane.open(shell)  # writes nothing: a failure here leaves an empty log, as before anything ran
    except BaseException:
        with contextlib.suppress(Exception):
            lane.close()
        log.close()
        _close_reporter(reporter, ui, fanout)
        raise
    for warning in ledger.problems:
        log.emit(wire.Note(msg=warning, level="warn"))
    with (
        SignalPolicy(lane.request_stop, lane.graceful, lane.aborts_on_signal) as signals,
        AbortSignal(inbox, lane.interruptible) as abort,
    ):
        ending = Ending("error", "engine error", ExitCode.RUN_FAILED)
        try:
            ending = _body(lane, bridge, log)
        finally:
            signals.closing = True  # from here on a signal is told, never raised: the shutdown gets written
            abort.disarm()
            _close(lane, bridge, inbox, ledger, hooks, services, log, ending)
            _close_reporter(reporter, ui, fanout)
    return SessionResult(ending.outcome, ending.reason, ending.exit_code)


def _body(lane: Lane, bridge: ControlBridge, log: SessionLog) -> Ending:
    """The lane's start lines, the bridge, the lane's body; every way it ends becomes an Ending."""

    def note(text: str, level: str) -> None:
        log.emit(wire.Note(msg=text, level=level))

    try:
        lane.before_start()  # inside: a failure here still ends the log with its shutdown
        lane.start()
        try:
            bridge.start(lane.paths.control_file)
        except OSError as exc:
            note(f"the control bridge could not start ({exc}); {lane.without_bridge}", "warn")
        return lane.run()
    except Aborted:
        note(f"aborted by the operator: {lane.aborted}", "warn")
        lane.wind_down()
        return Ending("stopped", "aborted by the operator", ExitCode.STOPPED)
    except KeyboardInterrupt:
        lane.wind_down()
        return Ending("stopped", "interrupted by a signal: aborted", ExitCode.STOPPED)
    except CrucibleError as exc:
        reason = exc.render()
        note(reason, "error")
        lane.wind_down()
        return Ending("error", reason, lane.exit_code_of(exc))
    except Exception as exc:  # a plugin bug must still close the log with exactly one shutdown
        reason = f"internal error: {type(exc).__name__}: {exc}"
        note(reason, "error")
        lane.wind_down()
        return Ending("error", reason, ExitCode.RUN_FAILED)


def _close(
    lane: Lane,
    bridge: ControlBridge,
    inbox: Inbox,
    ledger: Ledger,
    hooks: _Hooks,
    services: ServiceRuntime | None,
    log: SessionLog,
    ending: Ending,
) -> None:
    """Every path out, in one order: nothing more is admitted, the plugins hear the end, the services
    stop (their exits logged), the lane lets go of its runners, then summary, finished, shutdown."""
    bridge.close()
    if ending.outcome == "stopped":
        for order in inbox.take(orders.STOPPING):  # a stop or abort that arrived as the run ended
            if not order.unrecorded:
                ledger.settle(order.key, "applied", "the run stopped")
    iterations = lane.iterations()
    hooks.run_end(ending, iterations)
    try:
        lane.planned.shut(services)
    except Exception as exc:  # stopping must not cost the shutdown line; the guard still reaps children
        log.emit(
            wire.Note(msg=f"stopping the run's services failed: {type(exc).__name__}: {exc}", level="warn")
        )
    lane.close()
    for event in lane.closing_events(ending):
        log.emit(event)
    log.emit(wire.Finished(outcome=ending.outcome, iterations=iterations))
    log.emit(wire.Shutdown(outcome=ending.outcome, reason=ending.reason))
    log.close()


def _close_reporter(reporter: Reporter, name: str, fanout: ObserverFanout) -> None:
    """A reporter that already failed, or fails now, costs only its own output."""
    if f"reporter {name!r}" in fanout.disabled():
        return
    try:
        reporter.close()
    except Exception as exc:
        sys.stderr.write(
            f"crucible: warning: reporter {name!r} failed to close: {type(exc).__name__}: {exc}\n"
        )
