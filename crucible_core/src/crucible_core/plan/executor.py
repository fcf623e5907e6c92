"""The plan executor: walks an admitted graph, dispatching ready tasks in dependency order.

One thread (the caller's) makes every decision and writes every event. Command tasks run here
too: that thread starts their children and watches them (pipes, exits, deadlines) in one poll,
with a wake-up pipe the pool writes to; attempts of every other kind run on a bounded pool of
worker threads, each child through the supervisor. Decisions follow the
tables in `states.py`. The session log carries `plan_admitted` once, before any dispatch, and
one `task_result` per settled task, so a killed run resumes from the log without re-running
anything that settled.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core import process
from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.plan import ir
from crucible_core.plan.builtin_kinds import SUPERVISED_STEPS, SupervisedSteps
from crucible_core.plan.errors import PlanError
from crucible_core.plan.events import (
    CLEAN_EXIT,
    DIED_IN_PLAN_TASK,
    PLAN_ADMITTED,
    RECOVERY,
    SHUTDOWN,
    TASK_RESULT,
    BlockedWire,
    PlanAdmitted,
    TaskResult,
)
from crucible_core.plan.files import (
    FILES_DIR_NAME,
    INPUTS_DIR,
    CaptureRefused,
    FileStore,
    fingerprint,
    max_total_bytes,
    unstage,
)
from crucible_core.plan.kinds import (
    AgentTurns,
    Attempt,
    EngineOperations,
    Outcome,
    ServiceGate,
    TaskContext,
    TaskKindSpec,
)
from crucible_core.plan.output import declared_status
from crucible_core.plan.runners import TaskRunner, refusals, runner_for, unrunnable_tasks
from crucible_core.plan.states import (
    BLOCK_NOTES,
    PLAN_MACHINE,
    TASK_MACHINE,
    BlockReason,
    PlanState,
    TaskStatus,
)
from crucible_core.plan.workspace import DisposableCopies, DisposableCopy, TempDirCopies
from crucible_core.registry import Registry
from crucible_core.session_log import SessionLog, read_events

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

INPUTS_ENV = "CRUCIBLE_INPUTS"
TASK_ENV = "CRUCIBLE_TASK"
INPUT_FILES_ENV = "CRUCIBLE_INPUT_FILES"
MAX_INPUTS_BYTES = 1 << 20
# A task's inputs as $CRUCIBLE_INPUTS: json.dumps with these options, its encoder made once (a call
# with options builds a new one, at every task of every iteration).
_encode_inputs = json.JSONEncoder(separators=(",", ":"), default=str).encode
DEFAULT_MAX_ASKS = 20
ASKS_EMITTED = "asks_emitted"  # the wire's record of the asks one task handed on

_OUTCOME_STATUS = {
    Outcome.PASS: TaskStatus.PASS,
    Outcome.FAIL: TaskStatus.FAIL,
    Outcome.SKIPPED: TaskStatus.SKIPPED,
}
NOT_PASSED = frozenset({TaskStatus.FAIL, TaskStatus.TRANSPORT, TaskStatus.BLOCKED, TaskStatus.TRUNCATED})


@attrs.define
class ExecutorConfig:
    workspace: Path
    state_dir: Path
    caps: frozenset[str] = frozenset()
    jobs: int = attrs.field(factory=lambda: max(1, os.cpu_count() or 1))
    agent_cmd: str | None = None
    engine: EngineOperations | None = None
    copies: DisposableCopies | None = None  # None: temp-dir copies of the workspace
    env: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    iteration: int = 0
    # The wall-clock ceiling in seconds (None: none); time spent by earlier processes of this
    # run counts against it. Attempts in flight are killed when it is reached.
    max_seconds: float | None = None
    elapsed_before: float = 0.0
    # Called with a task's actual root before each task (re-applies frozen injects).
    before_task: Callable[[Path], object] | None = None  # what it returns is not used
    agent: AgentTurns | None = None  # a manifest's backend for agent tasks (None: agent_cmd)
    max_asks: int = DEFAULT_MAX_ASKS
    scoreless: bool = False  # a playbook: every row's score (metric) is null
    # Called after a task that ran in the shared workspace settles: (name, passed, quiescent),
    # quiescent meaning no other task is running there (a playbook's git memory).
    after_shared_task: Callable[[str, bool, bool], None] | None = None
    services: ServiceGate | None = None  # the run's declared services, resolved before dispatch
    # Called with the plan's spend just before this process writes the shutdown (a playbook's
    # summary goes there, so it is written once, ahead of the line that ends the run).
    before_shutdown: Callable[[float], None] | None = None
    # Every task in the shared workspace holds it alone (a playbook's git memory: a task's
    # changes are committed or discarded by themselves, never mixed with a concurrent task's).
    # Isolated tasks still run side by side.
    serial_shared: bool = False
    # Where a task needing a capability this machine lacks may run instead (plan/runners.py).
    task_runners: tuple[TaskRunner, ...] = ()
    # Asked before each dispatch: a reason (an operator's stop, a signal) ends dispatch there.
    # Nothing new starts, what runs settles, the epilogue does not run, and the plan ends
    # `stopped`; tasks never dispatched get no result (a resume dispatches them).
    stop: Callable[[], str | None] | None = None
    # Told where the plan stands after each change (the control bridge's `status`).
    publish: Callable[..., object] | None = None

    def provided(self) -> frozenset[str]:
        """Every capability tasks may need here: --cap, "any", and each available service."""
        return self.caps | {"any"} | (self.services.provides() if self.services else frozenset())

    def why_missing(self, capability: str) -> str:
        reasons = self.services.unavailable() if self.services else {}
        if capability in reasons:
            return f"{capability!r} is unavailable: {reasons[capability]}"
        return f"{capability!r}, which this run does not declare (--cap)"

    # Run each task on the calling thread (one at a time): in-process engine operations stay on
    # the thread that owns the run's signals, so an operator abort interrupts them as before.
    inline: bool = False
    # Run only the engine operations on the calling thread, every other kind on the pool: an
    # authored scored graph keeps its in-process operations where signals reach them while
    # its isolated critics still run side by side.
    inline_engine: bool = False
    # Write plan_admitted / task_result / shutdown; the default loop's iteration graph writes
    # none (its rows are the record a reader expects; see docs/architecture.md).
    record: bool = True
    # Whether this graph's end is the run's end (its `shutdown` line): a scored workflow's
    # iteration graph records its plan_admitted and task_result lines, but the loop ends the run.
    ends_run: bool = True


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PlanReport:
    state: PlanState
    verdict: str  # "pass" or "fail"
    spent_usd: float
    results: dict[str, TaskResult]
    reason: str
    # How dispatch stopped, as the shutdown line says it: finished (the graph ran out of work),
    # complete (a task declared early completion), error (a required task failed or can never
    # run here), budget (a ceiling), stopped (an operator or a signal).
    outcome: str = "finished"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PriorRun:
    """What a session log says an earlier process of this plan did."""

    admitted: dict[str, Any] | None
    results: dict[str, TaskResult]
    shutdown: dict[str, Any] | None

    @classmethod
    def read(cls, path: Path) -> PriorRun:
        admitted = None
        results: dict[str, TaskResult] = {}
        shutdown = None
        for event in read_events(path):
            kind = event["kind"]
            if kind == PLAN_ADMITTED and admitted is None:
                admitted = event
            elif kind == TASK_RESULT and admitted is not None:
                result = TaskResult.from_event(event)
                results.setdefault(result.task, result)
            elif kind == SHUTDOWN:
                shutdown = event
            elif shutdown is not None:
                shutdown = None  # a shutdown followed by more events belongs to an earlier process
        return cls(admitted, results, shutdown)

    def ended(self, tasks: Iterable[str]) -> bool:
        """Whether the recorded run is over: its last process wrote a shutdown and the graph's
        work is done. A stopped run, or one an engine error ended with `tasks` still unsettled,
        continues on resume; a failed or truncated graph settled every task."""
        if self.shutdown is None:
            return False
        outcome = self.shutdown.get("outcome")
        if outcome in ("finished", "complete", "budget"):
            return True
        return outcome != "stopped" and all(name in self.results for name in tasks)


@attrs.define(eq=False)
class _AttemptLoop:
    """One task's attempts so far: what the retry, budget and clock rules read after each one."""

    task: ir.Task
    spec: TaskKindSpec
    context: TaskContext
    root: Path
    before: dict[str, str | None]
    started: float
    attempts: int = 0
    cost: float = 0.0
    notes: list[str] = attrs.field(factory=list)


@attrs.define(eq=False)
class _OnThisThread:
    """A command task the dispatching thread drives: its attempt loop and its running child."""

    loop: _AttemptLoop
    steps: SupervisedSteps
    child: process.Supervised | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class _Settled:
    status: TaskStatus
    attempts: int
    cost_usd: float
    secs: float
    output: dict[str, Any] | None = None
    note: str = ""
    metric: float | None = None
    transport: str | None = None
    blocked: BlockedWire | None = None
    asks: tuple[dict[str, Any], ...] = ()


class PlanExecutor:
    def __init__(
        self,
        plan: ir.ValidPlan,
        kinds: Registry[TaskKindSpec],
        log: SessionLog | None,  # None: only to fold an ended run's report (nothing is written)
        config: ExecutorConfig,
        prior: PriorRun | None = None,
    ) -> None:
        self.plan = plan
        self.kinds = kinds
        self.log = log
        self.config = config
        self.prior = prior
        self.tasks = plan.by_name()
        self.status: dict[str, TaskStatus] = {}
        self.results: dict[str, TaskResult] = {}
        self.spent = 0.0
        self.halt: BlockedWire | None = None
        self.plan_state = PlanState.ADMITTED.value
        self._lock = threading.Lock()
        self._shared_exclusive = False
        self._shared_running = 0
        self._busy_services: set[str] = set()
        self._outcome_input: dict[str, Any] = {}
        self._index: dict[str, int] = {}
        self._remaining: dict[str, int] = {}
        self._candidates: list[int] = []
        self._stage_pending: set[str] = set()
        self._file_emitters = {task.name for task in plan.tasks if task.emits_files}
        self._copies = config.copies
        self.files = FileStore(config.state_dir / FILES_DIR_NAME, max_total_bytes(dict(config.env)))
        self.deadline: float | None = None
        if config.max_seconds is not None:
            self.deadline = time.monotonic() + config.max_seconds - config.elapsed_before
        self.completed: tuple[str, str] | None = None  # (task, reason) of an early completion
        self.stopped: str | None = None  # why dispatch was stopped (config.stop said so)
        self.waiting = False  # the calling thread only waits for a task to settle (an abort may interrupt it)
        self.asks_emitted = 0
        self._unrunnable_known: set[str] | None = None
        # The dispatching thread's poll (its command tasks' children, the pool's wake-up pipe)
        # and that pipe, made when first waited on: an inline graph never makes them.
        self._poll: process.Readiness | None = None
        self._wake_fds: tuple[int, int] | None = None
        self._here: dict[str, _OnThisThread] = {}  # command tasks running on this thread

    @property
    def copies(self) -> DisposableCopies:
        """Made on first use: a graph with no isolated task (the loop's) never pays for it."""
        if self._copies is None:
            self._copies = TempDirCopies(self.config.workspace, exclude=[self.config.state_dir])
        return self._copies

    # -- the plan ------------------------------------------------------------------------

    def run(self) -> PlanReport:
        if self.prior is not None and self.prior.admitted is not None:
            check_same_plan(self.plan, self.prior)
            self._fold(self.prior)
            if self.prior.ended(t.name for t in self.plan.stage(ir.Stage.MAIN)):
                return self._report(self._final_state_from_log(), "already finished")
            self._emit(
                RECOVERY,
                **{
                    # a stopped run wrote its shutdown; any other resume follows a process that died
                    "class": CLEAN_EXIT if self.prior.shutdown is not None else DIED_IN_PLAN_TASK,
                    "iter": self.config.iteration,
                    "detail": f"{len(self.results)} of {len(self.tasks)} tasks had settled",
                },
            )
            truncated = self._truncation()
            if truncated is not None:  # died while settling a truncated plan: finish that
                return self._truncate(None, truncated)
        else:
            # Killed before admission (or never run): nothing settled, so start from the top.
            truncated = self._truncation()
            if truncated is not None:
                return self._truncate(PlanAdmitted.of(self.plan), truncated)
            if self.config.record:
                self._emit_event(PlanAdmitted.wire_of(self.plan))
        self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.RUNNING.value)
        if self.halt is not None:  # folded from the log: the predecessor had already halted
            self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.HALTED.value)
        self._skip_unrunnable_advisory()
        # Left on a stop (an interrupt, an error here): attempts running elsewhere end first, so
        # leaving the pool does not wait on them and nothing is left running remotely.
        with (
            self._wake_pipe_closed_on_exit(),
            _task_pool(self.config) as pool,
            self._runners_cancelled_on_exit(),
        ):
            self._drive(pool, self.plan.stage(ir.Stage.MAIN))
            main_state = self._main_state()
            epilogue = [t for t in self.plan.stage(ir.Stage.EPILOGUE) if t.name not in self.status]
            # an operator's stop and a ceiling both end the run here: the epilogue does not spend
            if epilogue and main_state not in (PlanState.BUDGET, PlanState.STOPPED):
                self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.EPILOGUE.value)
                self._outcome_input = self._outcome(main_state)
                if self.halt is not None and self.halt.reason == BlockReason.REQUIRED_TASK_FAILED.value:
                    self.halt = None  # a required failure does not block the epilogue
                self._drive(pool, epilogue)
            ceiling = BlockReason.WALL_CLOCK_CEILING if self._clock_halted() else BlockReason.BUDGET_CEILING
            for task in epilogue:
                if task.name not in self.status and self.stopped is None:  # stopped: left undispatched
                    self._block(task, ceiling.value, None)
        if self.stopped is not None:
            main_state = PlanState.STOPPED  # a stop during the epilogue still ends the run stopped
        self.plan_state = PLAN_MACHINE.step(self.plan_state, main_state.value)
        reason = self._reason(main_state)
        self._before_shutdown()
        self._emit(SHUTDOWN, outcome=self._exit_token(main_state), reason=reason)
        return self._report(main_state, reason)

    def _before_shutdown(self) -> None:
        if self.config.before_shutdown is not None and self.config.record and self.config.ends_run:
            self.config.before_shutdown(self.spent)

    @contextlib.contextmanager
    def _wake_pipe_closed_on_exit(self) -> Iterator[None]:
        """Entered before the pool, so left after it: no pool thread can write to the pipe (or
        to another file given its descriptor's number) once it is closed."""
        try:
            yield
        finally:
            fds, self._wake_fds, self._poll = self._wake_fds, None, None
            for fd in fds or ():
                os.close(fd)

    @contextlib.contextmanager
    def _runners_cancelled_on_exit(self) -> Iterator[None]:
        """Left by an exception (an abort, an interrupt): every attempt in flight ends now, here
        (their children killed) and elsewhere (the runners cancel theirs), so leaving the pool
        does not wait on them and nothing is left running. Their results are not recorded: a
        resume dispatches those tasks again."""
        try:
            yield
        except BaseException:
            for runner in self.config.task_runners:
                runner.cancel()
            if not self.config.inline:  # inline, the one child ran on this thread and is gone already
                process.kill_running()
            raise

    def _exit_token(self, main_state: PlanState) -> str:
        """The shutdown outcome: how dispatch stopped, not whether the verdict passed (a run that
        completed early after a required task failed is `complete`, with a failing verdict)."""
        if main_state is PlanState.BUDGET:
            return "budget"
        if main_state is PlanState.STOPPED:
            return "stopped"
        if self.completed is not None:
            return "complete"
        if main_state in (PlanState.FAILED, PlanState.TRUNCATED):
            return "error"
        return "finished"

    def _clock_out(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _time_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def _fold(self, prior: PriorRun) -> None:
        for name, result in prior.results.items():
            if name not in self.tasks:
                continue
            self.status[name] = TaskStatus(result.status)
            self.results[name] = result
            self.spent += result.cost_usd
        if self.spent > self.plan.plan.budget.usd:
            self.halt = BlockedWire(BlockReason.BUDGET_CEILING.value)
        for name, result in self.results.items():
            if self.tasks[name].stage is ir.Stage.MAIN and _completes(result.output):
                self.completed = (name, _completion_reason(result.output))
        for name, status in self.status.items():
            task = self.tasks[name]
            if task.stage is ir.Stage.MAIN and task.required and status in NOT_PASSED and self.halt is None:
                self.halt = BlockedWire(BlockReason.REQUIRED_TASK_FAILED.value, name)

    def _final_state_from_log(self) -> PlanState:
        return self._main_state()

    # -- static verdicts before any dispatch ---------------------------------------------

    def _runner_for(self, task: ir.Task) -> TaskRunner | None:
        """The task runner that takes this task, when this machine lacks what it needs."""
        if task.needs == "any" or task.needs in self.config.provided():  # "any" is always provided
            return None
        spec: TaskKindSpec = self.kinds.entries[task.kind].value
        return runner_for(task, spec, self.config.task_runners)

    def _unrunnable(self) -> set[str]:
        # Asked twice before dispatch (truncation, then advisory skips), on the same graph and caps.
        if self._unrunnable_known is None:
            self._unrunnable_known = unrunnable_tasks(self.plan, self.config.provided(), self._runner_for)
        return self._unrunnable_known

    def _truncation(self) -> str | None:
        unrunnable = self._unrunnable()
        for name in self.plan.order:
            if name in unrunnable and self.tasks[name].required:
                task = self.tasks[name]
                if task.needs not in self.config.provided() and self._runner_for(task) is None:
                    return f"required task {name!r} needs {self._why_missing(task)}"
                return f"required task {name!r} depends on work that cannot run here"
        return None

    def _why_missing(self, task: ir.Task) -> str:
        why = self.config.why_missing(task.needs)
        spec: TaskKindSpec = self.kinds.entries[task.kind].value
        return "; ".join([why, *refusals(task, spec, self.config.task_runners)])

    def _truncate(self, admitted: PlanAdmitted | None, why: str) -> PlanReport:
        # Nothing is dispatched; every task settles truncated with the verdict's reason.
        if admitted is not None:
            self._emit_event(admitted.as_wire())
        self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.TRUNCATED.value)
        for name in self.plan.order:
            if name in self.status:
                continue
            self._settle(self.tasks[name], _Settled(TaskStatus.TRUNCATED, 0, 0.0, 0.0, note=why))
        self._before_shutdown()
        self._emit(SHUTDOWN, outcome=self._exit_token(PlanState.TRUNCATED), reason=f"truncated: {why}")
        return self._report(PlanState.TRUNCATED, f"truncated: {why}")

    def _skip_unrunnable_advisory(self) -> None:
        caps = self.config.provided()
        unrunnable = self._unrunnable()
        for name in self.plan.order:
            if name in unrunnable and name not in self.status:
                task = self.tasks[name]
                why = (
                    f"needs {self._why_missing(task)}"
                    if task.needs not in caps and self._runner_for(task) is None
                    else "a dependency cannot run here"
                )
                self._settle(task, _Settled(TaskStatus.SKIPPED, 0, 0.0, 0.0, note=why))

    # -- the dispatch loop ---------------------------------------------------------------

    def _drive(self, pool: ThreadPoolExecutor | None, tasks: list[ir.Task]) -> None:
        """Run one stage's tasks to completion; candidates are tracked, never rescanned.

        A task becomes a candidate when its last dependency settles (or, joining "all", as
        soon as one dependency fails); candidates dispatch in the plan's dependency order.
        """
        stage = {task.name for task in tasks}
        self._index = {name: i for i, name in enumerate(self.plan.order)}
        self._remaining = {
            name: sum(1 for dep in self.tasks[name].depends_on if dep not in self.status) for name in stage
        }
        self._candidates = [self._index[n] for n in stage if self._remaining[n] == 0 and n not in self.status]
        heapq.heapify(self._candidates)
        self._stage_pending = {n for n in stage if n not in self.status}
        done: queue.SimpleQueue[tuple[ir.Task, _Settled]] = queue.SimpleQueue()
        in_flight: set[str] = set()
        try:
            while True:
                self._check_clock()
                self._dispatch_ready(pool, in_flight, done)
                if not in_flight:
                    break
                if done.empty():
                    self._wait(done)
                while not done.empty():  # on the clock running out: halt, then wait for the killed attempts
                    task, settled = done.get()
                    self._take(task, settled, in_flight)
        except BaseException:
            # An abort or an interrupt: the children this thread runs go with it (group killed,
            # reaped, escaped descendants killed); their tasks get no result, a resume runs them.
            # One child's finish failing must not leave the others running: each is finished,
            # and the abort (not that failure) is what propagates; a child whose finish failed
            # stays on the abort list, which the engine's exit kills.
            here, self._here = self._here, {}
            for running in here.values():
                if running.child is not None:
                    with contextlib.suppress(Exception):
                        running.child.finish()
            raise

    def _take(self, task: ir.Task, settled: _Settled, in_flight: set[str]) -> None:
        """Settle one task that came back (from the pool, or from this thread's own children)."""
        if self.halt is None and self._clock_out():
            self._check_clock()
        in_flight.discard(task.name)
        self._release(task)
        self._settle(task, settled)
        self._after_settle(task, settled)
        hook = self.config.after_shared_task
        if hook is not None and task.isolation is ir.Isolation.SHARED and settled.attempts:
            hook(task.name, settled.status is TaskStatus.PASS, self._shared_running == 0)
        self._publish()

    def _ensure_readiness(self) -> process.Readiness:
        """The dispatching thread's poll, with the pool's wake-up pipe in it (made on first use)."""
        if self._poll is None:
            self._poll = process.Readiness()
            self._wake_fds = os.pipe()  # both ends close-on-exec: no child inherits them
            os.set_blocking(self._wake_fds[0], False)
            os.set_blocking(self._wake_fds[1], False)  # a pool thread never blocks on it
            self._poll.add(self._wake_fds[0], _drain_wake)
        return self._poll

    def _wait(self, done: queue.SimpleQueue[tuple[ir.Task, _Settled]]) -> None:
        """Sleep until a pool attempt settles, a child of this thread needs attention, or the wall
        clock runs out; then drive this thread's children and queue what settled."""
        readiness = self._ensure_readiness()
        timeout = self._time_left() if self.halt is None else None
        for running in self._here.values():
            wake = running.child.next_wake() if running.child is not None else None
            if wake is not None:
                left = max(0.0, wake - time.monotonic())
                timeout = left if timeout is None else min(timeout, left)
        self.waiting = True
        try:
            readiness.wait(timeout)
        finally:
            self.waiting = False
        now = time.monotonic()
        for name, running in list(self._here.items()):
            child = running.child
            if child is None or not child.advance(now):
                continue
            try:
                completed = child.finish()
            except Exception as exc:  # as `process.run` failing inside a kind on the pool
                running.child = None
                note = f"internal error in {running.loop.task.kind}: {type(exc).__name__}: {exc}"
                settled = self._attempt_over(running, Attempt(Outcome.FAIL, note=note))
            else:
                running.child = None  # (a retry's child takes its place)
                settled = self._attempt_done(running, completed)
            if settled is not None:
                del self._here[name]
                done.put((running.loop.task, settled))

    def _run_task(
        self, task: ir.Task, inputs: dict[str, Any], done: queue.SimpleQueue[Any], wake: bool = False
    ) -> None:
        """One task's attempts, then its settlement queued; `wake`: on a pool thread, so the
        dispatching thread is woken through its pipe."""
        try:
            settled = self._execute(task, inputs)
        except Exception as exc:  # a kind's bug settles its task, never the whole plan
            settled = _internal_error(exc)
        done.put((task, settled))
        if wake and self._wake_fds is not None:
            # after the put: the dispatching thread, woken, finds the settlement queued
            with contextlib.suppress(BlockingIOError):  # full: it is awake with bytes to read
                os.write(self._wake_fds[1], b"\0")

    def _notice_settled(self, task: ir.Task, status: TaskStatus) -> None:
        self._stage_pending.discard(task.name)
        for child in self.plan.dependents.get(task.name, ()):
            if child not in self._remaining:
                continue
            self._remaining[child] -= 1
            joins_all = self.tasks[child].join is ir.Join.ALL
            if self._remaining[child] == 0 or (joins_all and status in NOT_PASSED | {TaskStatus.SKIPPED}):
                heapq.heappush(self._candidates, self._index[child])

    def _check_clock(self) -> None:
        # A cost halt stands; the clock replaces a required-failure halt (a ceiling also stops the epilogue).
        if self._clock_out() and (
            self.halt is None or self.halt.reason == BlockReason.REQUIRED_TASK_FAILED.value
        ):
            self.halt = BlockedWire(BlockReason.WALL_CLOCK_CEILING.value)
            if self.plan_state == PlanState.RUNNING.value:
                self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.HALTED.value)

    def _halted(self) -> bool:
        return self.halt is not None

    def _stop_asked(self) -> bool:
        if self.stopped is None and self.config.stop is not None:
            self.stopped = self.config.stop()
            if self.stopped is not None:
                self._publish()
        return self.stopped is not None

    def _publish(self) -> None:
        if self.config.publish is not None:
            phase = "stopping" if self.stopped is not None else self.plan_state
            self.config.publish(
                phase=phase, spent=round(self.spent, 6), settled=len(self.status), tasks=len(self.tasks)
            )

    def _dispatch_ready(
        self, pool: ThreadPoolExecutor | None, in_flight: set[str], done: queue.SimpleQueue[Any]
    ) -> None:
        if self._stop_asked():
            return  # stopped: nothing new starts, and nothing undispatched is blocked
        if self.completed is not None and self.plan_state != PlanState.EPILOGUE.value and self.halt is None:
            return  # early completion: nothing more dispatches, and nothing undispatched is blocked
        if self.halt is not None:
            for name in sorted(self._stage_pending - in_flight, key=self._index.__getitem__):
                if name not in self.status:
                    self._block(self.tasks[name], self.halt.reason, self.halt.task)
            return
        while self._candidates:
            index = self._candidates[0]
            name = self.plan.order[index]
            if name in self.status or name in in_flight:
                heapq.heappop(self._candidates)
                continue
            task = self.tasks[name]
            decision = self._readiness(task)
            if decision is None:
                heapq.heappop(self._candidates)  # pushed again when its last dependency settles
                continue
            if isinstance(decision, _Settled):
                heapq.heappop(self._candidates)
                self._settle(task, decision)
                self._after_settle(task, decision)
                if self._halted():  # a method call: mypy would keep the narrowing from above
                    self._dispatch_ready(pool, in_flight, done)
                    return
                continue
            if len(in_flight) >= self.config.jobs or not self._claim(task):
                return  # dispatch stays in dependency order: no task overtakes a waiting one
            heapq.heappop(self._candidates)
            TASK_MACHINE.step("pending", "running")
            in_flight.add(name)
            spec: TaskKindSpec = self.kinds.entries[task.kind].value
            if self.config.inline or (self.config.inline_engine and spec.engine):
                self._run_task(task, decision, done)
                return  # settled before the next dispatch: the caller's loop takes it off `done`
            steps = self._steps_here(task, spec)
            if steps is not None:
                settled = self._begin_here(task, spec, steps, decision)
                if settled is not None:  # settled before any child ran (or every spawn failed)
                    done.put((task, settled))
                continue
            assert pool is not None  # only an inline executor runs without one, and it never submits
            self._ensure_readiness()  # before the submit: the pool wakes this thread through it
            pool.submit(self._run_task, task, decision, done, True)

    def _readiness(self, task: ir.Task) -> dict[str, Any] | _Settled | None:
        """The task's inputs if it can dispatch now, a settlement if it never will, None to wait."""
        statuses = {dep: self.status.get(dep) for dep in task.depends_on}
        if task.join is ir.Join.ALL:
            for dep, status in statuses.items():
                if status in NOT_PASSED:
                    return self._blocked(BlockReason.DEPENDENCY_DID_NOT_PASS.value, dep)
            for dep, status in statuses.items():
                if status is TaskStatus.SKIPPED:
                    return _Settled(TaskStatus.SKIPPED, 0, 0.0, 0.0, note=f"dependency {dep!r} skipped")
            if any(status is None for status in statuses.values()):
                return None
            inputs = {dep: self._output(dep) for dep in task.depends_on}
        else:
            if any(status is None for status in statuses.values()):
                return None
            if task.join is ir.Join.PASSED:
                passing = [dep for dep, status in statuses.items() if status is TaskStatus.PASS]
                if not passing:
                    return self._blocked(BlockReason.DEPENDENCY_DID_NOT_PASS.value, task.depends_on[0])
                inputs = {dep: self._output(dep) for dep in passing}
            else:
                inputs = {dep: self._envelope(dep, task) for dep in task.depends_on}
        if task.stage is ir.Stage.EPILOGUE:
            inputs["outcome"] = self._outcome_input
        return inputs

    def _blocked(self, reason: str, task: str | None) -> _Settled:
        note = BLOCK_NOTES[BlockReason(reason)].format(task=task)
        return _Settled(TaskStatus.BLOCKED, 0, 0.0, 0.0, note=note, blocked=BlockedWire(reason, task))

    def _block(self, task: ir.Task, reason: str, culprit: str | None) -> None:
        ceilings = (BlockReason.BUDGET_CEILING.value, BlockReason.WALL_CLOCK_CEILING.value)
        shown = culprit if reason not in ceilings else None
        settled = self._blocked(reason, shown)
        self._settle(task, settled)

    def _output(self, name: str) -> Any:
        result = self.results.get(name)
        return result.output if result is not None else None

    def _envelope(self, dep: str, consumer: ir.Task) -> dict[str, Any]:
        result = self.results[dep]
        return {
            "status": result.status,
            "note": result.note or None,
            "output": result.output,
            "files_staged": self.files.has(dep),
        }

    def _outcome(self, main_state: PlanState) -> dict[str, Any]:
        exit_token = self._exit_token(main_state)
        tasks = {
            name: {"status": self.results[name].status, "note": self.results[name].note or None}
            for name in self.plan.order
            if self.tasks[name].stage is ir.Stage.MAIN and name in self.results
        }
        return {
            "exit": exit_token,
            "verdict": "pass" if main_state is PlanState.FINISHED else "fail",
            "tasks": tasks,
        }

    # -- shared-workspace exclusivity ----------------------------------------------------

    def _claim(self, task: ir.Task) -> bool:
        gate = self.config.services
        serial = gate is not None and task.needs in gate.provides() and gate.one_at_a_time(task.needs)
        if serial and task.needs in self._busy_services:
            return False  # the service serves one task at a time
        if not self._claim_workspace(task):
            return False
        if serial:
            self._busy_services.add(task.needs)
        return True

    def _claim_workspace(self, task: ir.Task) -> bool:
        if task.isolation is ir.Isolation.WORKTREE:
            return True
        exclusive = self.kinds.entries[task.kind].value.exclusive or self.config.serial_shared
        if self._shared_exclusive or (exclusive and self._shared_running):
            return False
        self._shared_running += 1
        self._shared_exclusive = exclusive
        return True

    def _release(self, task: ir.Task) -> None:
        self._busy_services.discard(task.needs)
        if task.isolation is ir.Isolation.WORKTREE:
            return
        self._shared_running -= 1
        if self._shared_running == 0:
            self._shared_exclusive = False

    # -- settling ------------------------------------------------------------------------

    def _settle(self, task: ir.Task, settled: _Settled) -> None:
        state = "running" if settled.attempts else "pending"
        TASK_MACHINE.step(state, settled.status.value)
        if settled.status in (
            TaskStatus.SKIPPED,
            TaskStatus.TRANSPORT,
            TaskStatus.BLOCKED,
            TaskStatus.TRUNCATED,
        ):
            self.files.remove(task.name)
        result = TaskResult(
            task=task.name,
            status=settled.status.value,
            plan_version=self.plan.plan.version,
            task_kind=task.kind,
            iter=self.config.iteration,
            attempts=settled.attempts,
            cost_usd=round(settled.cost_usd, 6),
            metric=None if self.config.scoreless else settled.metric,
            output=settled.output,
            note=settled.note,
            secs=round(settled.secs, 3),
            blocked=settled.blocked,
            transport=settled.transport,
        )
        self.status[task.name] = settled.status
        self.results[task.name] = result
        if settled.asks:
            self._emit(ASKS_EMITTED, task=task.name, asks=list(settled.asks))
        if self.config.record:
            self._emit_event(result.as_wire())
        self._notice_settled(task, settled.status)

    def _after_settle(self, task: ir.Task, settled: _Settled) -> None:
        if self.plan_state == PlanState.RUNNING.value:
            self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.RUNNING.value)
        if (
            task.stage is ir.Stage.MAIN
            and settled.status is TaskStatus.PASS
            and self.completed is None
            and _completes(settled.output)
        ):
            self.completed = (task.name, _completion_reason(settled.output))
        if settled.blocked is not None and settled.blocked.reason == BlockReason.WALL_CLOCK_CEILING.value:
            self._check_clock()
        if self.spent > self.plan.plan.budget.usd and (
            self.halt is None or self.halt.reason != BlockReason.BUDGET_CEILING.value
        ):
            self.halt = BlockedWire(BlockReason.BUDGET_CEILING.value)
            if self.plan_state == PlanState.RUNNING.value:
                self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.HALTED.value)
            return
        if (
            self.halt is None
            and task.stage is ir.Stage.MAIN
            and task.required
            and settled.status in NOT_PASSED
        ):
            self.halt = BlockedWire(BlockReason.REQUIRED_TASK_FAILED.value, task.name)
            self.plan_state = PLAN_MACHINE.step(self.plan_state, PlanState.HALTED.value)

    def _main_state(self) -> PlanState:
        if self.spent > self.plan.plan.budget.usd or self._clock_halted():
            return PlanState.BUDGET
        if self.stopped is not None:
            return PlanState.STOPPED
        for task in self.plan.stage(ir.Stage.MAIN):
            status = self.status.get(task.name)
            if status is None and self.completed is not None:
                continue  # left undispatched by early completion: not part of the verdict
            if status is TaskStatus.TRUNCATED:
                return PlanState.TRUNCATED
            if task.required and status not in (TaskStatus.PASS, TaskStatus.SKIPPED):
                return PlanState.FAILED
        return PlanState.FINISHED

    def _clock_halted(self) -> bool:
        return any(
            r.blocked is not None and r.blocked.reason == BlockReason.WALL_CLOCK_CEILING.value
            for r in self.results.values()
        ) or (self.halt is not None and self.halt.reason == BlockReason.WALL_CLOCK_CEILING.value)

    def _reason(self, state: PlanState) -> str:
        if state is PlanState.STOPPED:
            return f"stopped: {self.stopped}; no new task was started"
        if state is PlanState.BUDGET and self._clock_halted():
            return f"wall_clock: the {self.config.max_seconds:g}-second ceiling was reached"
        if state is PlanState.BUDGET:
            return f"cost: spent ${self.spent:.4f} of ${self.plan.plan.budget.usd:.4f}"
        if state is PlanState.FAILED:
            failed = [
                t.name
                for t in self.plan.stage(ir.Stage.MAIN)
                if t.required and self.status.get(t.name) not in (TaskStatus.PASS, TaskStatus.SKIPPED)
            ]
            return f"failed: required task(s) did not pass: {', '.join(failed)}"
        if self.completed is not None:
            name, why = self.completed
            return f"complete: task {name!r} declared early completion" + (f": {why}" if why else "")
        return "passed: every required task passed"

    def _report(self, state: PlanState, reason: str) -> PlanReport:
        verdict = "pass" if state is PlanState.FINISHED else "fail"
        return PlanReport(state, verdict, self.spent, dict(self.results), reason, self._exit_token(state))

    def _emit(self, kind: str, **fields: Any) -> None:
        if not self.config.record or (kind == SHUTDOWN and not self.config.ends_run):
            return
        # Through the shared wire: the fields become its record (a shape it refuses is a bug here).
        line = wire.from_object({"kind": kind, **fields})
        if line is None or isinstance(line.event, wire.Unknown):
            raise ValueError(f"not a session wire event: {kind} {sorted(fields)}")
        self._emit_event(line.event)

    def _emit_event(self, event: wire.Event) -> None:
        """Write an event already in the wire's shape (no decoding of fields on the way)."""
        if not self.config.record:
            return
        assert self.log is not None, "an executor without a log only folds a recorded run"
        self.log.emit(event)

    # -- one task, on a worker thread ----------------------------------------------------

    def _execute(self, task: ir.Task, inputs: dict[str, Any]) -> _Settled:
        started = time.monotonic()
        spec: TaskKindSpec = self.kinds.entries[task.kind].value
        copy: DisposableCopy | None = None
        root = self.config.workspace
        if task.isolation is ir.Isolation.WORKTREE:
            try:
                copy = self.copies.make_copy(task.name)
            except OSError as exc:
                return _Settled(
                    TaskStatus.TRANSPORT,
                    1,
                    0.0,
                    time.monotonic() - started,
                    note=f"could not make a disposable copy: {exc}",
                    transport="workspace",
                )
            root = copy.path
        # Nothing is ever staged in a plan that declares no files (and no path is built for it).
        staged_dir = root / INPUTS_DIR / task.name if self._file_emitters else None
        try:
            return self._attempts(task, spec, inputs, root, staged_dir, started)
        finally:
            if staged_dir is not None:
                unstage(staged_dir)
            if copy is not None:
                copy.discard()

    def _attempts(
        self,
        task: ir.Task,
        spec: TaskKindSpec,
        inputs: dict[str, Any],
        root: Path,
        staged_dir: Path | None,
        started: float,
    ) -> _Settled:
        loop = self._prepare(task, spec, inputs, root, staged_dir, started)
        if isinstance(loop, _Settled):
            return loop
        while True:
            loop.attempts += 1
            settled = self._after_attempt(loop, self._attempt_once(task, spec, loop.context))
            if settled is not None:
                return settled

    def _prepare(
        self,
        task: ir.Task,
        spec: TaskKindSpec,
        inputs: dict[str, Any],
        root: Path,
        staged_dir: Path | None,
        started: float,
    ) -> _AttemptLoop | _Settled:
        """What every attempt of the task reads (staged files, environment, deadline), or the
        settlement when it cannot start at all."""
        try:
            staged: list[str] = []
            if staged_dir is not None:  # no task declares files: nothing to stage (and no path to touch)
                staged_dir, staged = self.files.stage(self._file_producers(task), root, task.name)
        except (OSError, CaptureRefused) as exc:
            return self._blocked(BlockReason.STAGING_REFUSED.value, str(exc))
        encoded = _encode_inputs(inputs)
        if len(encoded) > MAX_INPUTS_BYTES:
            return self._blocked(BlockReason.STAGING_REFUSED.value, f"inputs over {MAX_INPUTS_BYTES} bytes")
        if self.config.before_task is not None:
            self.config.before_task(root)  # frozen injects, in the root this task really runs in
        env = {**self.config.env, INPUTS_ENV: encoded, TASK_ENV: task.name}
        if staged:
            env[INPUT_FILES_ENV] = str(staged_dir)
        remaining = self._time_left()
        timeout = task.timeout if remaining is None else min(task.timeout, remaining)
        if timeout <= 0:
            return self._blocked(BlockReason.WALL_CLOCK_CEILING.value, None)
        context = TaskContext(
            task,
            root,
            env,
            inputs,
            timeout,
            self.config.agent_cmd,
            self.config.engine,
            self.config.agent,
        )
        before = fingerprint(root, task.emits_files, self.files.max_bytes) if task.emits_files else {}
        return _AttemptLoop(task, spec, context, root, before, started)

    def _after_attempt(self, loop: _AttemptLoop, attempt: Attempt) -> _Settled | None:
        """The task's settlement after this attempt, or None to try again (a transport failure
        with retries left, the budget and the clock not reached, the plan not halted)."""
        task, attempts, started = loop.task, loop.attempts, loop.started
        loop.cost += attempt.cost_usd
        cost = loop.cost
        if self._clock_out():  # killed (or finished) at the ceiling: it does not count as work
            settled = self._blocked(BlockReason.WALL_CLOCK_CEILING.value, None)
            with self._lock:
                self.spent += attempt.cost_usd
            return attrs.evolve(settled, attempts=attempts, cost_usd=cost, secs=time.monotonic() - started)
        with self._lock:
            self.spent += attempt.cost_usd
            over = self.spent > self.plan.plan.budget.usd
            halted = self.halt is not None
        if attempt.outcome is not Outcome.TRANSPORT:
            return self._conclude(task, attempt, attempts, cost, loop.root, loop.before, started)
        loop.notes.append(f"attempt {attempts}: {attempt.note}")
        if over:
            settled = self._blocked(BlockReason.BUDGET_CEILING.value, None)
            return attrs.evolve(settled, attempts=attempts, cost_usd=cost, secs=time.monotonic() - started)
        if attempts > task.retries or halted:
            return _Settled(
                TaskStatus.TRANSPORT,
                attempts,
                cost,
                time.monotonic() - started,
                note="; ".join(loop.notes),
                transport=attempt.transport or "other",
            )
        return None

    # -- a command task, on the dispatching thread ------------------------------------------

    def _steps_here(self, task: ir.Task, spec: TaskKindSpec) -> SupervisedSteps | None:
        """How to drive the task's attempts on this thread, or None for the pool: only a kind
        whose attempt is one supervised command, run here, in the shared workspace (an isolated
        copy is made, and declared files staged, by file I/O that would stall this thread), and
        needing no service (reached by a blocking wait). Not beside engine tasks run inline
        (`inline_engine`): while one of those runs, nothing here would watch the children."""
        steps = SUPERVISED_STEPS.get(spec.run)
        if steps is None or task.isolation is not ir.Isolation.SHARED or self._file_emitters:
            return None
        if self.config.inline_engine:
            return None
        gate = self.config.services
        if gate is not None and task.needs in gate.provides():
            return None
        return steps if self._runner_for(task) is None else None

    def _begin_here(
        self, task: ir.Task, spec: TaskKindSpec, steps: SupervisedSteps, inputs: dict[str, Any]
    ) -> _Settled | None:
        """Prepare the task and start its first attempt's child; its settlement if it has one already."""
        try:
            loop = self._prepare(task, spec, inputs, self.config.workspace, None, time.monotonic())
        except Exception as exc:  # as on the pool: a bug (a before_task hook's) settles its task
            return _internal_error(exc)
        if isinstance(loop, _Settled):
            return loop
        running = _OnThisThread(loop, steps)
        settled = self._start_attempt(running)
        if settled is None:
            self._here[task.name] = running
        return settled

    def _start_attempt(self, running: _OnThisThread) -> _Settled | None:
        """Start the next attempt's child (None), or settle when no child runs (every spawn failed)."""
        loop = running.loop
        context = loop.context
        loop.attempts += 1
        try:
            child = process.start(
                running.steps.command(context),
                cwd=context.workdir,
                env=context.env,
                timeout=context.timeout,
                readiness=self._ensure_readiness(),
            )
        except Exception as exc:  # a kind's bug fails its task, not the plan
            note = f"internal error in {loop.task.kind}: {type(exc).__name__}: {exc}"
            return self._attempt_over(running, Attempt(Outcome.FAIL, note=note))
        if isinstance(child, process.Completed):  # could not start: a transport failure, retried
            return self._attempt_done(running, child)
        running.child = child
        return None

    def _attempt_done(self, running: _OnThisThread, completed: process.Completed) -> _Settled | None:
        try:
            attempt = running.steps.conclude(completed)
        except Exception as exc:
            note = f"internal error in {running.loop.task.kind}: {type(exc).__name__}: {exc}"
            attempt = Attempt(Outcome.FAIL, note=note)
        return self._attempt_over(running, attempt)

    def _attempt_over(self, running: _OnThisThread, attempt: Attempt) -> _Settled | None:
        """The task's settlement, or None when another attempt's child was started."""
        try:
            settled = self._after_attempt(running.loop, attempt)
        except Exception as exc:  # as on the pool (publishing declared files, say)
            return _internal_error(exc)
        return self._start_attempt(running) if settled is None else settled

    def _attempt_once(self, task: ir.Task, spec: TaskKindSpec, context: TaskContext) -> Attempt:
        """One attempt; a task that needs a service reaches it first, and loses it as a transport failure."""
        gate = self.config.services
        needs_service = gate is not None and task.needs in gate.provides()
        if needs_service:
            assert gate is not None
            reached = gate.reach(task.needs, task.name)
            if isinstance(reached, str):  # not ready in time, exited, over its restart bound
                return Attempt(Outcome.TRANSPORT, note=reached, transport="gateway")
            env, servers = reached
            context = attrs.evolve(context, env={**context.env, **env}, mcp_servers=servers)
        runner = self._runner_for(task)
        try:
            attempt = spec.run(context) if runner is None else runner.run(context, spec)
        except Exception as exc:  # a kind's bug fails its task, not the plan
            attempt = Attempt(
                Outcome.FAIL, note=f"internal error in {task.kind}: {type(exc).__name__}: {exc}"
            )
        if needs_service and gate is not None and not gate.still_up(task.needs):
            return Attempt(
                Outcome.TRANSPORT,
                note=f"{task.needs} exited while the task ran",
                cost_usd=attempt.cost_usd,
                transport="gateway",
            )
        return attempt

    def _conclude(
        self,
        task: ir.Task,
        attempt: Attempt,
        attempts: int,
        cost: float,
        root: Path,
        before: dict[str, str | None],
        started: float,
    ) -> _Settled:
        status = _OUTCOME_STATUS[attempt.outcome]
        note = attempt.note
        declared = declared_status(attempt.output)
        if status is TaskStatus.PASS and declared == "skipped":
            status, note = TaskStatus.SKIPPED, note or "the task declared a skip"
        elif status is TaskStatus.PASS and declared == "fail":
            status, note = TaskStatus.FAIL, note or "the task declared itself failed"
        if status is TaskStatus.PASS and task.emits:
            missing = [
                f for f in task.emits if not isinstance(attempt.output, dict) or f not in attempt.output
            ]
            if missing:
                status, note = TaskStatus.FAIL, f"declared output field(s) missing: {', '.join(missing)}"
        asks: tuple[dict[str, Any], ...] = ()
        if status is TaskStatus.PASS and isinstance(attempt.output, dict) and "asks" in attempt.output:
            asks, problem = self._take_asks(attempt.output["asks"])
            if problem:
                status, note, asks = TaskStatus.FAIL, problem, ()
        if task.emits_files and status in (TaskStatus.PASS, TaskStatus.FAIL):
            try:
                self.files.publish(
                    task.name, root, task.emits_files, before if status is TaskStatus.FAIL else None
                )
            except (CaptureRefused, OSError) as exc:
                self.files.remove(task.name)
                if status is TaskStatus.PASS:
                    status, note = TaskStatus.FAIL, f"declared file not captured: {exc}"
                else:
                    note = f"{note}; files not captured: {exc}" if note else f"files not captured: {exc}"
        elif status is not TaskStatus.PASS:
            self.files.remove(task.name)
        return _Settled(
            status,
            attempts,
            cost,
            time.monotonic() - started,
            output=attempt.output,
            note=note,
            metric=attempt.metric,
            asks=asks,
        )

    def _take_asks(self, raw: Any) -> tuple[tuple[dict[str, Any], ...], str | None]:
        """Validate a task's emitted asks and charge them to the run's bound (all or none)."""
        if not isinstance(raw, list):
            return (), "asks must be a list of {key, workflow, params} objects"
        asks = []
        for item in raw:
            # the wire's own rules (a key that crosses runs, a workflow name), so what is emitted decodes
            problem = wire.ask_problem(item)
            if problem is None and not isinstance(item.get("params", {}), dict):
                problem = "an ask's params must be an object"
            if problem is not None:
                return (), f"each ask must be {{key, workflow, params}}: {problem}"
            asks.append({"key": item["key"], "workflow": item["workflow"], "params": item.get("params", {})})
        with self._lock:
            if self.asks_emitted + len(asks) > self.config.max_asks:
                return (), f"asks would pass the run's bound of {self.config.max_asks} (--max-asks)"
            self.asks_emitted += len(asks)
        return tuple(asks), None

    def _file_producers(self, task: ir.Task) -> list[str]:
        """Passing ancestors on every dependency path, plus failing direct deps of a settled join."""
        if not self._file_emitters:
            return []
        found: list[str] = []
        seen: set[str] = set()
        stack = list(task.depends_on)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            status = self.status.get(name)
            if self.tasks[name].emits_files and (
                status is TaskStatus.PASS
                or (task.join is ir.Join.SETTLED and name in task.depends_on and status is TaskStatus.FAIL)
            ):
                found.append(name)
            stack.extend(self.tasks[name].depends_on)
        return sorted(found)


def _internal_error(exc: Exception) -> _Settled:
    """A kind's bug settles its task, never the whole plan."""
    return _Settled(TaskStatus.FAIL, 1, 0.0, 0.0, note=f"internal error: {type(exc).__name__}: {exc}")


def _drain_wake(fd: int) -> None:
    """Empty the wake-up pipe: the settlements it announced are on the queue already."""
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


def _task_pool(config: ExecutorConfig) -> contextlib.AbstractContextManager[ThreadPoolExecutor | None]:
    """The worker threads the plan's attempts run on; none for an inline executor, which runs
    each on the calling thread (the loop's iteration graph, every iteration): it then never
    imports concurrent.futures, and the logging package that comes with it."""
    if config.inline:
        return contextlib.nullcontext()
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=max(1, config.jobs), thread_name_prefix="plan-task")


def check_same_plan(plan: ir.ValidPlan, prior: PriorRun) -> None:
    """A resume must run the plan its state directory admitted (PlanError otherwise)."""
    if prior.admitted is None:
        return
    admitted = PlanAdmitted.of(plan)
    # compared as the wire reads them: the log carries the contract's full task records
    try:
        before = [wire.converter.structure(t, wire.PlanTaskWire) for t in prior.admitted.get("tasks") or []]
    except Exception:  # a damaged admitted line is not the same plan
        before = None
    now = [wire.converter.structure(t, wire.PlanTaskWire) for t in admitted.fields()["tasks"]]
    if before != now or prior.admitted.get("budget_usd") != admitted.budget_usd:
        raise PlanError(
            ["the plan differs from the one this state dir admitted; a resume must run the same plan"],
            source="resume",
        )


def _completes(output: Any) -> bool:
    return isinstance(output, dict) and output.get("complete") is True


def _completion_reason(output: Any) -> str:
    reason = output.get("reason") if isinstance(output, dict) else None
    return reason if isinstance(reason, str) else ""
