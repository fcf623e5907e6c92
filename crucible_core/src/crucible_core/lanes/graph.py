"""What a playbook and a plan file share as session bodies: one pass of an admitted graph on the executor.

Both dispatch their graph once under the session: an operator's `crucible stop` or the first
Ctrl-C/SIGTERM ends dispatch (nothing new starts, what runs settles, the epilogue does not run),
and `crucible abort` or the second signal cancels what runs now (its children killed, a task
runner's attempts cancelled; their results are not recorded, so a resume dispatches them
again). The other orders are refused by the bridge, by name. The shutdown outcome says how
dispatch stopped (PlanReport.outcome); the exit code says whether the verdict passed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from crucible_core.contract import wire
from crucible_core.contract.plain_text import plain
from crucible_core.control import orders
from crucible_core.errors import CrucibleError, ExitCode, WorkspaceError
from crucible_core.lanes.lane import Ending, Shell
from crucible_core.plan import ir
from crucible_core.plan.executor import ExecutorConfig, PlanExecutor, PlanReport, PriorRun
from crucible_core.plan.kinds import TaskKindSpec
from crucible_core.plan.runners import TaskRunner
from crucible_core.registry import Registry
from crucible_core.run.gates import Aborted
from crucible_core.session_log import log_size

# What a graph lane acts on; the bridge refuses every other order by name.
GRAPH_ORDERS = frozenset({orders.STOP, orders.ABORT})


def recorded_run(log_path: Path, *, resume: bool, what: str) -> PriorRun | None:
    """What an earlier process of this run recorded; a fresh run over a recorded one is refused,
    saying how to continue it or how to start a new one."""
    if log_size(log_path) == 0:
        return PriorRun.read(log_path) if resume else None  # killed before anything was written
    prior = PriorRun.read(log_path)
    if resume:
        return prior
    state = log_path.parent
    if prior.shutdown is not None and prior.shutdown.get("outcome") != "stopped":
        raise WorkspaceError(
            f"{state} already holds a {what} run, which ended ({prior.shutdown.get('outcome')})",
            hint=f"to start a new run, move {state} aside or give another --state-dir "
            "(--resume only prints its verdict again)",
        )
    raise WorkspaceError(
        f"{state} already holds a {what} run",
        hint="pass --resume to continue it, or choose another --state-dir",
    )


def ended_report(
    plan: ir.ValidPlan, kinds: Registry[TaskKindSpec], config: ExecutorConfig, prior: PriorRun
) -> PlanReport | None:
    """The recorded verdict of a run that already ended (a resume then runs nothing), else None."""
    if prior.admitted is None or not prior.ended(t.name for t in plan.stage(ir.Stage.MAIN)):
        return None
    return PlanExecutor(plan, kinds, None, config, prior).run()


def tell_how_to_start_anew(state: Path, outcome: str) -> None:
    sys.stderr.write(
        f"crucible: the run in {state} already ended ({outcome}); to start a new one, move {state} "
        "aside or give another --state-dir\n"
    )


def print_tasks(order: Iterable[str], report: PlanReport, *, aligned: bool) -> None:
    """One line per settled task, in plan order (a task's words are printed as plain text)."""
    width = max((len(name) for name in report.results), default=4) if aligned else 0
    for name in order:
        result = report.results.get(name)
        if result is None:
            continue
        note = f"  {plain(result.note)}" if result.note else ""
        if aligned:
            print(f"{name.ljust(width)}  {result.status:<9}{note}")
        else:
            print(f"{name}  {result.status}{note}")


def report_ending(report: PlanReport) -> Ending:
    """The shutdown outcome the report gives, and the exit code its verdict does: 0 iff the
    verdict passed, 3 for a stop, 4 otherwise."""
    if report.verdict == "pass":
        code = ExitCode.OK
    elif report.outcome == "stopped":
        code = ExitCode.STOPPED
    else:
        code = ExitCode.RUN_FAILED
    return Ending(report.outcome, report.reason, code)


class GraphLane:
    """The part of a session body a playbook and a plan file share: stop, abort, status, the report."""

    honours = GRAPH_ORDERS
    graceful = "stopping: no new task starts, the running ones finish"
    without_bridge = "signals still work"
    aborted = "the running tasks were cancelled"

    def __init__(self) -> None:
        self.stop_reason: str | None = None
        self.executor: PlanExecutor | None = None
        self.session: Shell | None = None
        self.report: PlanReport | None = None
        self.task_runners: tuple[TaskRunner, ...] = ()

    def attach(self, session: Shell) -> None:
        self.session = session

    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason  # a signal handler: set only, the executor asks at its next dispatch

    def interruptible(self) -> bool:
        """Only while the executor waits for a task to settle: never halfway through writing a line."""
        return self.executor is not None and self.executor.waiting

    def aborts_on_signal(self) -> bool:
        """With task runners open, a signal cancels what runs elsewhere at once (a pod being
        deleted is sent SIGTERM, then killed): nothing is left running on the cluster."""
        return bool(self.task_runners)

    def wind_down(self) -> None:
        return None  # what ran was cancelled on the way out of the executor

    def close(self) -> None:
        for runner in self.task_runners:
            runner.close()

    def iterations(self) -> int:
        return 1 if self.report is not None else 0

    def exit_code_of(self, error: CrucibleError) -> ExitCode:
        """A graph's typed error keeps its own documented code (a workspace a task broke: 11)."""
        return error.exit_code

    # -- helpers for the lanes ------------------------------------------------------------------
    def stop_asked(self) -> str | None:
        """Asked by the executor before each dispatch: why to stop dispatching, or None.

        An operator's abort interrupts right here too (the executor leaves, cancelling what runs)."""
        assert self.session is not None
        inbox, ledger = self.session.inbox, self.session.ledger
        if inbox.abort_requested:
            raise Aborted
        for order in inbox.take(frozenset({orders.STOP})):
            reason = order.payload.get("reason") or "no reason given"
            self.session.log.emit(wire.Note(msg=f"stopped by the operator: {reason}"))
            if not order.unrecorded:
                ledger.settle(order.key, "applied", "the run stopped")
            self.stop_reason = self.stop_reason or "stopped by the operator"
        return self.stop_reason

    def execute(
        self,
        plan: ir.ValidPlan,
        kinds: Registry[TaskKindSpec],
        config: ExecutorConfig,
        prior: PriorRun | None,
    ) -> PlanReport:
        """The graph on the executor, with the session's stop, abort and status."""
        assert self.session is not None
        session = self.session
        config.stop = self.stop_asked
        config.publish = session.inbox.publish
        config.ends_run = False  # the session writes the summary, finished and shutdown
        session.inbox.publish(phase="running", spent=0.0, settled=0, tasks=len(plan.tasks))
        self.executor = PlanExecutor(plan, kinds, session.log, config, prior)
        self.report = self.executor.run()
        return self.report

    def supersede_owed(self) -> None:
        """A resume is itself the answer to a stop or abort the previous process still owed (the
        only orders a graph takes), as it is in the loop (C-LEDGER)."""
        assert self.session is not None
        ledger = self.session.ledger
        for entry in ledger.owed():
            ledger.settle(entry.key, "superseded", "a resume overrides it")
