"""Running a playbook manifest: one pass of its graph under a cost and a wall-clock ceiling.

No World, no Judge, no engine operations. Each settled task writes one task_result row
(score null); the run exits 0 iff its verdict is valid. A resume folds settled tasks from the
log, never re-dispatches them, and rebuilds the workspace from the pristine start plus the
declared files of every folded task that passed in the shared workspace, each committed as
that task's.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.errors import ExitCode, UsageError, WorkspaceError
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.run.agent_task import agent_task_runner

if TYPE_CHECKING:
    from crucible_core.plan.executor import PriorRun
    from crucible_core.plan.files import FileStore
    from crucible_core.run.git_memory import GitMemory


@attrs.frozen
class PlaybookRequest:
    max_cost: float | None
    max_time: float | None
    params: Mapping[str, str] = attrs.field(factory=dict)
    caps: frozenset[str] = frozenset()
    state_dir: Path | None = None
    resume: bool = False
    iterations: int | None = None
    max_asks: int = 20
    max_task_timeout: float = 86_400.0
    task_timeout: float = 1800.0  # the deadline of a task that declares none
    jobs: int | None = None


def run_playbook(plugins: Any, loaded: LoadedManifest, request: PlaybookRequest) -> int:
    from crucible_core.contract import wire
    from crucible_core.manifest.paths import PRIVATE_DIR_NAME
    from crucible_core.plan.executor import ExecutorConfig, PlanExecutor, PriorRun
    from crucible_core.plan.files import FILES_DIR_NAME, FileStore
    from crucible_core.plan.ir import Isolation
    from crucible_core.plan.load import plan_from_data
    from crucible_core.plan.runners import terminate_interrupts
    from crucible_core.plan.validate import validate
    from crucible_core.run.git_memory import GitMemory
    from crucible_core.run.identity import run_identity
    from crucible_core.run.injects import copy_injects, refresh_frozen
    from crucible_core.services import run_services
    from crucible_core.session_log import SessionLog, log_size, read_events
    from crucible_core.workflow.pack import ARTIFACT_NAME, effective_workflow, plan_data, to_toml

    if request.iterations is not None and request.iterations > 1:
        raise UsageError("a playbook runs its graph exactly once; --iterations must be 1 or omitted")
    if request.max_cost is None or request.max_cost <= 0 or request.max_time is None or request.max_time <= 0:
        raise UsageError(
            "a playbook needs both ceilings before anything runs: --max-cost USD and --max-time DURATION",
            hint="for example: crucible run --manifest crucible.toml --max-cost 2 --max-time 30m",
        )
    document = effective_workflow(loaded, request.params)
    assert document is not None
    kinds = plugins.registry("task kind")
    if request.task_timeout > request.max_task_timeout:
        raise UsageError("--task-timeout must not exceed --max-task-timeout")
    document = {
        **document,
        "task": [{"timeout": request.task_timeout, **task} for task in document["task"]],
    }
    plan = validate(
        plan_from_data(plan_data(document, request.max_cost), kinds, source=str(loaded.path)),
        kinds,
        source=str(loaded.path),
    )
    too_long = [t.name for t in plan.tasks if t.timeout > request.max_task_timeout]
    if too_long:
        raise UsageError(
            f"task(s) {', '.join(too_long)} declare a timeout over the operator's maximum of "
            f"{request.max_task_timeout:g}s (--max-task-timeout)"
        )
    state = (request.state_dir or loaded.dir / "state").resolve()
    workspace = loaded.workspace
    log_path = state / "session.jsonl"
    artifact = to_toml(document)
    prior = None
    elapsed = 0.0
    memory = GitMemory(workspace, state / PRIVATE_DIR_NAME / "playbook-git")
    rebuilt = False
    if log_size(log_path) > 0:
        if not request.resume:
            raise WorkspaceError(f"{state} already holds a run", hint="pass --resume to continue it")
        frozen = state / ARTIFACT_NAME
        if frozen.is_file() and frozen.read_text(encoding="utf-8") != artifact:
            raise WorkspaceError(
                "the compiled workflow differs from the one this run froze",
                hint="resume with the same workflow.star and --param values",
            )
        prior = PriorRun.read(log_path)
        elapsed = _elapsed_before(read_events(log_path))
        if prior.shutdown is None:
            rebuilt = _rebuild_workspace(loaded, memory)
    else:
        if request.resume and workspace.exists() and any(workspace.iterdir()):
            rebuilt = _rebuild_workspace(loaded, memory)
        else:
            _fresh_workspace(loaded, workspace)
        copy_injects(loaded.injects, workspace)
    state.mkdir(parents=True, exist_ok=True)
    (state / ARTIFACT_NAME).write_text(artifact, encoding="utf-8")
    memory.ensure()
    if rebuilt and prior is not None:
        shared = {task.name for task in plan.tasks if task.isolation is Isolation.SHARED}
        stored = FileStore(state / FILES_DIR_NAME, max_bytes=0)  # read only: nothing is captured here
        _replay_declared_files(memory, stored, shared, prior)
    started = time.monotonic()

    def write_summary(spent: float) -> None:
        log.emit(_summary(spent, elapsed + time.monotonic() - started))

    config = ExecutorConfig(
        workspace=workspace,
        state_dir=state,
        caps=request.caps,
        max_seconds=request.max_time,
        elapsed_before=elapsed,
        before_task=lambda root: refresh_frozen(loaded.injects, root),
        agent_runner=_agent_runner(plugins, loaded, state, log_path),
        max_asks=request.max_asks,
        scoreless=True,
        after_shared_task=memory.settled,
        serial_shared=True,  # so each shared task's changes are its own commit (or discard)
        before_shutdown=write_summary,
    )
    if request.jobs is not None:
        config.jobs = request.jobs
    # The catalog is read before the log opens: a broken one is refused with nothing recorded.
    planned = run_services.plan_services(
        loaded.services, os.environ, log_path=log_path, resumed=prior is not None
    )
    config.env = planned.task_env(os.environ)  # a service's secrets reach only that service
    log = SessionLog(log_path, planned.redactor(os.environ))
    try:
        if prior is None or prior.shutdown is None:
            log.emit(_start_event(loaded, request, workspace))
            # the comparability key, as the loop writes it: the compiled workflow is in its hash
            base = memory.base_commit() or ""
            identity = run_identity(loaded, base, artifact)
            log.emit(wire.Identity(identity=identity, base_commit=base, resumed=True if prior else None))
        config.task_runners = _task_runners(plugins, loaded, state, config, log)
        with (
            planned.serving(state_dir=state, emit=log.emit) as services,
            terminate_interrupts(config.task_runners),
        ):
            config.services = services
            report = PlanExecutor(plan, kinds, log, config, prior).run()
    finally:
        for runner in config.task_runners:
            runner.close()
        log.close()
    for name in plan.order:
        result = report.results.get(name)
        if result is not None:
            note = f"  {result.note}" if result.note else ""
            print(f"{name}  {result.status}{note}")
    valid = report.verdict == "pass"
    print(f"playbook {'valid' if valid else 'invalid'}: {report.reason} (spent ${report.spent_usd:.4f})")
    return int(ExitCode.OK) if valid else int(ExitCode.RUN_FAILED)


def _summary(spent: float, active_s: float) -> Any:
    """The run's summary, once, before its shutdown: a playbook keeps nothing and scores nothing."""
    from crucible_core.contract import wire

    return wire.Summary(
        rows=[],
        gate="task",
        best_score=None,
        iterations=1,
        kept=0,
        discarded=0,
        kept_shas=[],
        spent=round(spent, 6),
        active_s=round(active_s, 3),
        solved=False,
    )


def _task_runners(
    plugins: Any, loaded: LoadedManifest, state: Path, config: Any, log: Any
) -> tuple[Any, ...]:
    """The task runners the manifest's [deploy] section configures (none without one)."""
    from crucible_core.plan.runners import TaskRunnerContext, open_task_runners

    if loaded.manifest.deploy is None:
        return ()
    context = TaskRunnerContext(
        run_name=loaded.dir.name,
        state_dir=state,
        base_dir=loaded.dir,
        deploy=loaded.manifest.deploy,
        env=dict(config.env),
        emit=log.emit,
    )
    return open_task_runners(plugins, context)


def _start_event(loaded: LoadedManifest, request: PlaybookRequest, workspace: Path) -> Any:
    """The run's `start` line: a playbook carries the task lane's gate label, never a third one."""
    from crucible_core import __version__
    from crucible_core.contract import wire

    return wire.Start(
        goal=loaded.goal_text(),
        gate="task",
        model=loaded.manifest.agent.model or "",
        namespace="",
        iters_total=1,
        max_cost=float(request.max_cost or 0.0),
        max_secs=int(request.max_time or 0),
        version=__version__,
        manifest=str(loaded.path),
        workspace=str(workspace),
        backend=loaded.manifest.agent.backend,
        resumed=request.resume,
    )


def _elapsed_before(events: Any) -> float:
    """Time earlier processes of this run spent, from the log: each process's first to last
    event (`start` or `recovery` begins a process), so time spent dead does not count."""
    total = 0.0
    first = last = None
    for event in events:
        ts = event.get("ts")
        if not isinstance(ts, int | float):
            continue
        if event.get("kind") in ("start", "recovery") and first is not None and last is not None:
            total += last - first
            first = None
        first = ts if first is None else first
        last = ts
    if first is not None and last is not None:
        total += last - first
    return max(0.0, total)


def _fresh_workspace(loaded: LoadedManifest, workspace: Path) -> None:
    """The pristine start: a copy of [repo].path, or an empty directory when there is no [repo]."""
    repo = loaded.manifest.repo
    if workspace.exists() and any(workspace.iterdir()):
        if loaded.inside_workspace():
            return
        raise WorkspaceError(f"workspace {workspace} already exists", hint="move it away, or pass --resume")
    if repo is not None and repo.path is not None:
        source = loaded.resolve(repo.path)
        if workspace.exists():
            workspace.rmdir()
        shutil.copytree(source, workspace, symlinks=True, ignore=shutil.ignore_patterns("state"))
    elif repo is not None and repo.url is not None:
        from crucible_core import process
        from crucible_core.run.git_memory import ENGINE_CONFIG, GIT_ENV

        # No system or global config, hooks or fsmonitor; HOME stays unset so ssh finds its keys.
        env = {key: value for key, value in GIT_ENV.items() if key not in ("HOME", "XDG_CONFIG_HOME")}
        done = process.run(
            ["git", *ENGINE_CONFIG, "clone", "--quiet", "--no-recurse-submodules", repo.url, str(workspace)],
            cwd=loaded.dir,
            env=env,
            timeout=600,
        )
        if not done.ok:
            raise WorkspaceError(
                f"git clone {repo.url} {done.describe_failure()}: {done.stderr.strip()[-300:]}"
            )
    else:
        workspace.mkdir(parents=True, exist_ok=True)


def _rebuild_workspace(loaded: LoadedManifest, memory: GitMemory) -> bool:
    """Put the workspace back to the pristine start (its base commit, or a fresh start when the
    memory cannot give it back); False when the workspace is the manifest's own checkout."""
    from crucible_core.run.injects import copy_injects

    if loaded.inside_workspace():
        return False  # the workspace is the manifest's own checkout: never delete it
    workspace = memory.workspace
    if not memory.reset_to_base():
        if os.path.lexists(workspace):
            shutil.rmtree(workspace)
        _fresh_workspace(loaded, workspace)
    copy_injects(loaded.injects, workspace)
    return True


def _replay_declared_files(memory: GitMemory, files: FileStore, shared: set[str], prior: PriorRun) -> None:
    """The declared files of every folded task that passed in the shared workspace, put back in
    the order the tasks settled, each committed as that task's, as the uninterrupted run did.

    An isolated task's files never reached the shared workspace (its dependents get them staged).
    """
    for name, result in prior.results.items():
        if result.status != "pass" or name not in shared:
            continue
        for rel, stored in files.captured(name):
            target = memory.workspace / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(stored, target)
        memory.settled(name, passed=True, quiescent=True)


def _agent_runner(plugins: Any, loaded: LoadedManifest, state: Path, log_path: Path) -> Any:
    """Agent tasks run one turn through the manifest's [agent] backend and harness."""
    cache: dict[str, Any] = {}

    def backend() -> Any:
        if "backend" not in cache:
            from crucible_core.manifest.paths import RunPaths
            from crucible_core.run.drivers import build_drivers
            from crucible_core.shell import Shell

            paths = RunPaths.resolve(loaded, state_dir=state)
            paths.ensure_state_dirs()
            cache["backend"] = build_drivers(
                plugins, loaded, paths, Shell(cwd=paths.workspace, env={})
            ).backend
        return cache["backend"]

    return agent_task_runner(backend)
