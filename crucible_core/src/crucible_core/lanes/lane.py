"""What a lane is: the part of a run that differs between the loop, a playbook and a plan file.

The session (crucible_core/session/) resolves a request into one lane before anything is
written, then drives it through the same shell: the log, its redaction, the reporters, the
lifecycle hooks, the control bridge, the signals, the services, and the closing lines. A lane
supplies only its body, the lines it adds to the log's start and end, the operator orders it
honours, and what the first signal means to it.

Order of the calls the shell makes (docs/architecture.md, "The session and its lanes"):

    open(shell)         the log exists; build what writes to it (the loop's engine). Nothing written.
    before_start()      notes that go ahead of the start line (the loop: a resume's budget flags)
    start()             the lane's start lines; the bridge starts right after
    run() -> Ending     the body; makes the lifecycle (shell.lifecycle) and fires its run start
    request_stop(why)   from the signal handler: stop at the next safe point (never writes)
    wind_down()         after an abort or an error, before the run end hooks (the loop restores)
    close()             after the services stopped: release what prepare opened (task runners)
    closing_events()    the summary (where the lane has one), just ahead of `finished` and `shutdown`
    exit_code_of(err)   the exit code when the body ended with a typed error
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import CrucibleError, ExitCode

if TYPE_CHECKING:
    from crucible_core.broker.declaration import Disclosure
    from crucible_core.broker.service import TurnBroker
    from crucible_core.contract import wire
    from crucible_core.control.inbox import Inbox
    from crucible_core.control.ledger import Ledger
    from crucible_core.manifest.loader import LoadedManifest
    from crucible_core.manifest.paths import RunPaths
    from crucible_core.plugins import Plugins
    from crucible_core.protocols import Publisher
    from crucible_core.redact import Redactor
    from crucible_core.run.lifecycle import Lifecycle
    from crucible_core.run.state_lock import StateLock
    from crucible_core.services.run_services import PlannedServices
    from crucible_core.services.runtime import ServiceRuntime
    from crucible_core.session.request import SessionRequest
    from crucible_core.session_log import SessionLog


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Ending:
    """How a lane's body ended: the shutdown outcome (the wire's vocabulary), why, and the exit code."""

    outcome: str
    reason: str
    exit_code: ExitCode


class MakeLifecycle(Protocol):
    """Makes the run's lifecycle once: the loop's with its broker, disclosure and [publish] publisher."""

    def __call__(
        self, broker: TurnBroker | None, disclosure: Disclosure | None, publisher: Publisher | None = None
    ) -> Lifecycle: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Shell:
    """What the session hands a lane once the log is open."""

    log: SessionLog
    redactor: Redactor
    inbox: Inbox  # the control bridge's hand-over: orders in, status out
    ledger: Ledger
    services: ServiceRuntime | None
    # Each puts back one engine file in the state directory (the lock, the bridge's record).
    state_guards: tuple[Callable[[], str | None], ...]
    # The run's lifecycle hooks, made once (the loop makes it with its broker and disclosure).
    lifecycle: MakeLifecycle


class Lane(Protocol):
    """One kind of run, prepared (everything resolved, nothing written) and ready to drive."""

    kind: str  # "loop", "playbook" or "plan": RunContext.lane, and the bridge's refusals name it
    honours: frozenset[str]  # the operator orders it acts on; the bridge refuses the others by name
    paths: RunPaths
    manifest: LoadedManifest | None  # None for a plan file
    run_id: str  # stable across resumes of one recorded run
    resumed: bool
    planned: PlannedServices  # resolved before the log opened
    agent_env: dict[str, str]  # [agent].env: its values never reach the log
    engine_env: dict[str, str]  # what contract commands get: its secret-named values are masked too
    reporter_total: int | None  # the iteration total a reporter shows
    graceful: str  # what the first Ctrl-C or SIGTERM does, told to the operator
    without_bridge: str  # what still reaches the run when the bridge cannot start
    aborted: str  # what an operator's abort did, for the log's note

    def open(self, shell: Shell) -> None: ...

    def before_start(self) -> None: ...

    def start(self) -> None: ...

    def run(self) -> Ending: ...

    def request_stop(self, reason: str) -> None: ...

    def interruptible(self) -> bool: ...

    def aborts_on_signal(self) -> bool:
        """Whether the first Ctrl-C or SIGTERM aborts at once instead of stopping gracefully."""
        ...

    def wind_down(self) -> None: ...

    def close(self) -> None: ...

    def closing_events(self, ending: Ending) -> list[wire.Event]: ...

    def exit_code_of(self, error: CrucibleError) -> ExitCode:
        """The exit code of a run its body ended with this error."""
        ...

    def iterations(self) -> int: ...


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class LaneContext:
    """What a plugin's lane gets to resolve a manifest into a run, before the session log opens."""

    plugins: Plugins
    request: SessionRequest
    loaded: LoadedManifest
    take_lock: Callable[[Path], StateLock]  # take the state directory's lock once it is known


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class LaneSpec:
    """A kind of run a plugin provides, registered under the workflow type that selects it.

    `prepare` resolves everything (nothing written, the state lock taken through the context) and
    returns the lane to drive, or the Ending of a run that already ended. `check` is what `crucible
    check` adds about such a manifest once its graph validated: (level, text) findings, level one
    of "ok", "info", "warn", "fail".
    """

    prepare: Callable[[LaneContext], Lane | Ending]
    check: Callable[[Plugins, LoadedManifest], list[tuple[str, str]]] = lambda _plugins, _loaded: []
