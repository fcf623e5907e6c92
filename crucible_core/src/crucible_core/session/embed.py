"""crucible from Python: run, check and read results without the command line (re-exported by api.py).

`run` builds the same SessionRequest `crucible run` builds and hands it to the one session entry,
so a notebook or a CI job gets every guarantee the CLI gives (one log, the lock, the hooks, one
shutdown). Refusals before the log exists raise the typed CrucibleError the CLI would print;
an ended run is answered with a RunResult, whatever its outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import ExitCode, WorkspaceError
from crucible_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from crucible_core.plugins import Plugins

EventCallback = Callable[[Mapping[str, Any]], object]


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RunResult:
    """How a run ended, and its standing as `crucible results --json` reports it."""

    outcome: str  # finished | solved | budget | stopped | escalated | stalled | error
    reason: str
    exit_code: ExitCode  # what `crucible run` would have exited with
    state_dir: Path
    baseline: float | None
    best: float | None
    kept: int
    discarded: int
    iterations: int  # agent iterations the run has spent, over every resume
    document: Mapping[str, Any]  # the whole `crucible results --json` document

    @property
    def session_log(self) -> Path:
        return self.state_dir / "session.jsonl"

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class CheckReport:
    """What `crucible check` found: (level, text) lines, level one of ok | warn | fail | info."""

    lines: tuple[tuple[str, str], ...]

    @property
    def failed(self) -> bool:
        return any(level == "fail" for level, _ in self.lines)


class _EventRelay:
    """A plugin that hands each session event, once durably written, to an embedder's callback.

    Registered for one run only: the session calls it through `crucible_session_event`, like any
    observer, so a callback that raises is switched off and named in the log, never ends the run.
    """

    def __init__(self, callback: EventCallback) -> None:
        self.callback = callback

    @hookimpl
    def crucible_session_event(self, event: Mapping[str, Any]) -> None:
        self.callback(event)


def run(
    manifest: Path | str,
    *,
    iterations: int | None = None,
    max_cost: float | None = None,
    max_time: float | None = None,
    on_event: EventCallback | None = None,
    state_dir: Path | str | None = None,
    resume: bool = False,
    ui: str = "headless",
    params: Mapping[str, str] | None = None,
    caps: Iterable[str] = (),
    plugins: Plugins | None = None,
) -> RunResult:
    """Run (or with resume=True continue) the manifest's run in this process, as `crucible run` does.

    iterations, max_cost, max_time (seconds): the budget, as the CLI's flags. on_event receives
    every session event (the dict written to session.jsonl) after it is on disk. ui names the
    reporter that prints progress on stderr ("headless": warnings and one closing line).
    plugins: the plugin manager to run with (default: every installed plugin).
    """
    from crucible_core.run.budget import Budget
    from crucible_core.session.entry import execute
    from crucible_core.session.request import SessionRequest

    plugins = plugins if plugins is not None else _installed_plugins()
    manifest = Path(manifest)
    state = Path(state_dir) if state_dir is not None else None
    request = SessionRequest(
        manifest=manifest,
        budget=Budget(iterations=iterations, max_cost=max_cost, max_time=max_time),
        state_dir=state,
        ui=ui,
        resume=resume,
        params=dict(params or {}),
        caps=frozenset(caps),
    )
    relay = None
    if on_event is not None:
        relay = _EventRelay(on_event)
        plugins.pm.register(relay, name="the on_event callback")
    try:
        ended = execute(plugins, request)
    finally:
        if relay is not None:
            plugins.pm.unregister(relay)
    where = _state_dir_of(manifest, state)
    doc = results(where)
    return RunResult(
        outcome=ended.outcome,
        reason=ended.reason,
        exit_code=ended.exit_code,
        state_dir=where,
        baseline=doc.get("baseline"),
        best=doc.get("best"),
        kept=int(doc.get("kept") or 0),
        discarded=int(doc.get("discarded") or 0),
        iterations=_iterations(where / "session.jsonl"),
        document=doc,
    )


def check(
    manifest: Path | str,
    *,
    harness: str | None = None,
    caps: Iterable[str] = (),
    ui: str | None = None,
    plugins: Plugins | None = None,
) -> CheckReport:
    """What `crucible check` finds about the manifest, whatever its kind, line for line: a loop's
    drivers, settings, agent and gate (measured once, in a workspace set up for the check and
    removed; no agent turn is spent), a workflow's graph, a playbook's workspace history, the
    [[service]] resolution; with `ui`, first whether that reporter is installed.

    A manifest that does not load raises its ManifestError, as `crucible check` exits 10.
    """
    from crucible_core.session.check import check_manifest

    plugins = plugins if plugins is not None else _installed_plugins()
    findings = check_manifest(plugins, Path(manifest), harness=harness, caps=frozenset(caps), ui=ui)
    return CheckReport(tuple(findings.lines))


def results(state_dir: Path | str) -> dict[str, Any]:
    """The document `crucible results --json` prints for the run recorded in `state_dir`."""
    from crucible_core.flow.results import session_document

    log = Path(state_dir) / "session.jsonl"
    if not log.is_file():
        raise WorkspaceError(f"no session log at {log}", hint="pass the state directory of a run")
    return session_document(log)


def _installed_plugins() -> Plugins:
    from crucible_core.plugins import load_plugins

    return load_plugins()


def _state_dir_of(manifest: Path, state_dir: Path | None) -> Path:
    from crucible_core.manifest.containment import DEFAULT_STATE_DIR_NAME

    return (state_dir or manifest.resolve().parent / DEFAULT_STATE_DIR_NAME).resolve()


def _iterations(log: Path) -> int:
    """The iterations the last `finished` line of the log counts (0 before any)."""
    from crucible_core.session_log import read_events

    done = [e.get("iterations") for e in read_events(log) if e["kind"] == "finished"]
    return done[-1] if done and isinstance(done[-1], int) else 0
