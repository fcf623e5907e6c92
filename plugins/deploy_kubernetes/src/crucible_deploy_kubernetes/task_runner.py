"""The Kubernetes task runner: plan tasks needing what this machine lacks run as Jobs in the profile's cluster.

The executor hands a task here when its `needs` is one of the profile's `[tasks].capabilities`
and the machine does not provide it. Each attempt is one Job (backoffLimit 0: retrying is the
executor's policy). The task's kind runs unchanged; only its shell command is carried out in
the pod, so a command or evaluate task judges a Job's result exactly as it judges a local one.

An attempt in the pod:
- the workspace arrives as a ConfigMap copy ([tasks].workspace = "pack") or is the image's own;
  with a claim named ([tasks].claim), a "pack" workspace travels on that shared volume instead:
  the runner writes its tree as git objects there (shared_tree.py), the pod checks it out and
  verifies the tree id before the command runs;
- CRUCIBLE_INPUTS and CRUCIBLE_TASK are set as locally; nothing else of this machine's
  environment leaves it (only the profile's [tasks.env] and [[tasks.secret_env]] are added);
- the command's output streams to the pod log; when it ends, the pod prints a delimiter line
  and then its whole stdout in base64, which is what the kind reads as stdout; the exit code
  is the container's, from the API;
- the first `[tasks].log_lines` lines of the log are written to the session log as notes
  (the session log redacts them).

A kind that needs its workspace back (a wide round's proposal: `returns_workspace`) also
ships its standard input (the agent's prompt) in the pack, outside the copied workspace, and
the variable naming it (CRUCIBLE_PROMPT_FILE) points at it in the pod; the turn's own
variables (CRUCIBLE_ITERATION, CRUCIBLE_CANDIDATE, CRUCIBLE_APPROACH) go along, and
CRUCIBLE_WORKSPACE names the pod's workdir. When the command succeeds the pod prints the
workdir as a gzipped tar in base64 after a delimiter of its own; workspace_return.py checks it
as hostile input and lays it over the task's workdir (the fork) before the kind reads it. On a
claim the prompt is a file of the attempt's directory there, and the pod hashes its workdir into
that directory and prints the tree id instead; shared_tree.py checks and lays it over the fork.

A task that declares files (`emits_files`) gets them back the same way, whatever its exit
code: the pod script is given the declared paths as its arguments and, after the command,
prints a gzipped tar of those that exist after a third delimiter. workspace_return.py checks
it (only the declared paths, plain files, nothing through a link) and writes them into the
task's workdir, removing there any the pod did not have, before the kind returns; the
executor then captures them exactly as it captures a local task's files. An archive refused
or missing makes the command's result a failure that says why, and writes nothing.

Failures of the cluster (never scheduled, evicted, preempted, an API error, the Job deleted by
someone else) are transport failures, retried by the task's `retries`. The task's deadline
runs from the moment its pod starts; at the deadline the Job is deleted and the attempt fails
as a local command killed at its deadline does. Stopping the run deletes every Job it made.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
from kubernetes import client

from crucible_core.api import (
    Attempt,
    Completed,
    ManifestError,
    Outcome,
    ShellStdin,
    Task,
    TaskContext,
    TaskKindSpec,
    TaskRunnerContext,
    wire,
)
from crucible_deploy_kubernetes import cluster, jobs
from crucible_deploy_kubernetes import labels as L
from crucible_deploy_kubernetes.errors import ClusterError
from crucible_deploy_kubernetes.profile import DeployProfile, load_profile
from crucible_deploy_kubernetes.render import CONFIGMAP_MAX_BYTES, PACK_SKIP, plain_files
from crucible_deploy_kubernetes.settings import DeploySettings
from crucible_deploy_kubernetes.shared_tree import ObjectStore
from crucible_deploy_kubernetes.workspace_return import (
    FILES_DELIMITER,
    MAX_ENCODED_CHARS,
    ReturnRefused,
    bring_back,
    bring_back_files,
    split_workspace,
)

NAME = "kubernetes"
TASK_LABEL = "crucible.dev/task"
STDOUT_DELIMITER = "=== CRUCIBLE TASK STDOUT (rc="
TREE_DELIMITER = "=== CRUCIBLE TASK TREE ==="  # a returned workspace's tree id, on the shared claim
_TREE_ID = re.compile(r"[0-9a-f]{40}")
SETUP_FAILED = 97  # the pod script's exit code when the workspace could not be laid out
MAX_LOG_BYTES = 1 << 20  # the tail of a pod log kept per attempt (stdout comes from its end)
MAX_NOTE_CHARS = 500
# What crosses to the pod of this machine's environment: a task's inputs and name, and the
# engine's numbers a judge shows its measure (no secrets among them).
FORWARDED_ENV = (
    "CRUCIBLE_INPUTS",
    "CRUCIBLE_TASK",
    "CRUCIBLE_BASELINE_SCORE",
    "CRUCIBLE_BASELINE_TOTAL",
    "CRUCIBLE_BEST_SCORE",
)
# An agent turn's own variables (a wide proposal's), sent along as the local agent_cmd has them.
FORWARDED_TURN_ENV = ("CRUCIBLE_ITERATION", "CRUCIBLE_CANDIDATE", "CRUCIBLE_APPROACH")
WORKSPACE_ENV = "CRUCIBLE_WORKSPACE"  # set in the pod to its workdir when the command had it
# The pack entry holding a command's standard input: beside the workspace copy, never in it.
STDIN_NAME = ".crucible-task-stdin"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INPUT_FILES_ENV = "CRUCIBLE_INPUT_FILES"
POLL_FIRST, POLL_MAX = 0.1, 2.0  # seconds between status reads while a Job runs
# A task's deadline is enforced here; the Job's own activeDeadlineSeconds is a backstop for a
# runner that died, so it allows for scheduling plus this much slack.
BACKSTOP_SLACK = 60
# Pod waiting reasons that mean it will not start by itself: the attempt is a transport failure.
STUCK_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"}
)

# The pod's script: lay out the workspace, run the command with stdout also kept in a file,
# then print the delimiter and that stdout in base64. Base64 cannot contain a delimiter line, so
# nothing the command prints can pass for what follows the last one; the exit code is taken
# from the API (the container's termination), never from the log. Its arguments are the
# task's declared files, printed last as a tar of those present (each as ./path, so no name
# reads as an option). Plain POSIX sh: any image with sh, cp, tee and base64 works (tar and
# gzip too when something comes back).
TASK_SCRIPT = """\
set -u
command -v base64 >/dev/null 2>&1 || { echo "crucible: the task image has no base64" >&2; exit 97; }
if { [ -n "${CRUCIBLE_TASK_RETURN:-}" ] && [ -z "${CRUCIBLE_TASK_TREE:-}" ]; } || [ "$#" -gt 0 ]; then
  { command -v tar && command -v gzip; } >/dev/null 2>&1 || {
    echo "crucible: the task image has no tar or gzip, which bring files back" >&2; exit 97; }
fi
work="$CRUCIBLE_TASK_WORKDIR"
mkdir -p "$work" || exit 97
input=/dev/null
if [ -n "${CRUCIBLE_TASK_PACK:-}" ] && [ -d "$CRUCIBLE_TASK_PACK" ]; then
  for entry in "$CRUCIBLE_TASK_PACK"/* "$CRUCIBLE_TASK_PACK"/.[!.]*; do
    [ -e "$entry" ] || continue
    [ "$entry" = "$CRUCIBLE_TASK_PACK/.crucible-task-stdin" ] && continue
    cp -RL "$entry" "$work"/ || exit 97
  done
  [ -f "$CRUCIBLE_TASK_PACK/.crucible-task-stdin" ] && input="$CRUCIBLE_TASK_PACK/.crucible-task-stdin"
fi
if [ -n "${CRUCIBLE_TASK_TREE:-}" ]; then
  command -v git >/dev/null 2>&1 || {
    echo "crucible: the task image has no git, which lays the workspace out from the shared volume" >&2; exit 97; }
  cd "$work" || exit 97
  gitdir="${TMPDIR:-/tmp}/crucible-git.$$"
  mkdir -p "$gitdir/objects" "$gitdir/refs" "$gitdir/info" || exit 97
  echo "ref: refs/heads/crucible" > "$gitdir/HEAD"
  echo "* -text -filter -ident -diff -merge" > "$gitdir/info/attributes"
  tgit() {
    objects="$1"; shift
    GIT_DIR="$gitdir" GIT_WORK_TREE="$work" GIT_INDEX_FILE="$gitdir/index" GIT_OBJECT_DIRECTORY="$objects" \\
      GIT_ALTERNATE_OBJECT_DIRECTORIES="$CRUCIBLE_TASK_OBJECTS" GIT_CONFIG_NOSYSTEM=1 \\
      GIT_CONFIG_GLOBAL=/dev/null HOME="$gitdir" git -c core.autocrlf=false -c core.filemode=true "$@"
  }
  tgit "$gitdir/objects" read-tree "$CRUCIBLE_TASK_TREE" && tgit "$gitdir/objects" checkout-index -a -f || exit 97
  rm -f "$gitdir/index"
  laid=$(tgit "$gitdir/objects" add -A -f . && tgit "$gitdir/objects" write-tree) || exit 97
  if [ "$laid" != "$CRUCIBLE_TASK_TREE" ]; then
    echo "crucible: the workspace laid out here is tree $laid, not the candidate's $CRUCIBLE_TASK_TREE" >&2; exit 97
  fi
  [ -f "$CRUCIBLE_TASK_ATTEMPT/stdin" ] && input="$CRUCIBLE_TASK_ATTEMPT/stdin"
fi
[ -n "${CRUCIBLE_TASK_STDIN_ENV:-}" ] && export "$CRUCIBLE_TASK_STDIN_ENV=$input"
[ -n "${CRUCIBLE_WORKSPACE+x}" ] && export CRUCIBLE_WORKSPACE="$work"
cd "$work" || exit 97
out="${TMPDIR:-/tmp}/crucible-task-stdout.$$"
{ sh -c "$CRUCIBLE_TASK_COMMAND" < "$input"; echo "$?" > "$out.rc"; } | tee "$out"
rc=$(cat "$out.rc" 2>/dev/null || echo 1)
printf '\\n=== CRUCIBLE TASK STDOUT (rc=%s) ===\\n' "$rc"
base64 < "$out"
if [ -n "${CRUCIBLE_TASK_RETURN:-}" ] && [ "$rc" = 0 ]; then
  if [ -n "${CRUCIBLE_TASK_TREE:-}" ]; then
    mkdir -p "$CRUCIBLE_TASK_ATTEMPT/objects"
    back=$(tgit "$CRUCIBLE_TASK_ATTEMPT/objects" add -A -f -- . ':(exclude,glob)**/state/**' \\
      ':(exclude,glob)**/.venv/**' ':(exclude,glob)**/__pycache__/**' \\
      && tgit "$CRUCIBLE_TASK_ATTEMPT/objects" write-tree)
    printf '\\n=== CRUCIBLE TASK TREE ===\\n%s\\n' "$back"
  else
    printf '\\n=== CRUCIBLE TASK WORKSPACE ===\\n'
    tar -cf - . | gzip -c | base64
  fi
fi
if [ "$#" -gt 0 ]; then
  printf '\\n=== CRUCIBLE TASK FILES ===\\n'
  for declared in "$@"; do
    shift
    if [ -e "$declared" ] || [ -L "$declared" ]; then set -- "$@" "./$declared"; fi
  done
  if [ "$#" -gt 0 ]; then tar -cf - "$@" | gzip -c | base64; fi
fi
exit "$rc"
"""


def dns_label(raw: str, limit: int) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return re.sub(r"-{2,}", "-", name)[:limit].strip("-") or "task"


def split_log(text: str) -> tuple[str, str | None, int | None]:
    """(the live part, the stdout after the last delimiter or None, the exit code it printed).

    What follows the last delimiter must be base64 (the script's encoding of stdout); anything
    else there means the log was cut short or tampered with, and there is no stdout.
    """
    at = text.rfind("\n" + STDOUT_DELIMITER)
    if at < 0:
        return text, None, None
    live = text[:at]
    header, _, encoded = text[at + 1 :].partition("\n")
    match = re.fullmatch(re.escape(STDOUT_DELIMITER) + r"(-?\d+)\) ===", header.strip())
    if match is None:
        return text, None, None
    try:
        stdout = base64.b64decode("".join(encoded.split()), validate=True).decode("utf-8", "replace")
    except ValueError:
        return live, None, int(match.group(1))
    return live, stdout, int(match.group(1))


def pack_workspace(workdir: Path, stdin: bytes | None = None) -> list[tuple[str, bytes, int]]:
    """The task's workspace as (relative path, bytes, mode): plain files only, no VCS or state,
    plus `stdin` under STDIN_NAME. The sizes are added up before anything is read, so a
    workspace larger than a ConfigMap carries is refused (ValueError) without reading it."""
    chosen = [
        (rel, path)
        for rel, path in plain_files(workdir)
        # a worktree's pointer to its repository; the name stdin travels under
        if PurePosixPath(rel).name != ".git" and rel != STDIN_NAME
    ]
    total = sum(path.stat().st_size for _, path in chosen) + len(stdin or b"")
    if total > CONFIGMAP_MAX_BYTES:
        raise ValueError(
            f"the task's workspace holds {total} bytes, more than a ConfigMap carries "
            f"({CONFIGMAP_MAX_BYTES}); name a ReadWriteMany claim in [tasks].claim to ship it on a "
            'shared volume, or set [tasks].workspace = "image" and bake it into the image'
        )
    found = [(rel, path.read_bytes(), 0o755 if os.access(path, os.X_OK) else 0o644) for rel, path in chosen]
    if stdin is not None:
        found.append((STDIN_NAME, stdin, 0o644))
    return found


class _Cancelled(Exception):
    """The run is stopping: the attempt ends without a verdict of its own."""


@attrs.define
class _Attempt:
    """One Job in flight: what cancel and the deadline watchdog need to end it."""

    namespace: str
    job: str
    configmap: str | None
    response: Any = None  # the log stream being read, closed to stop reading at once
    timed_out: bool = False
    log_limit: int = MAX_LOG_BYTES  # the tail of the pod log kept (more when a workspace comes back)
    workspace: str | None = None  # the base64 workspace section the pod printed, if any
    declared: tuple[str, ...] = ()  # the task's emits_files, which the pod prints back
    files: str | None = None  # the base64 declared-files section the pod printed, if any
    tree: str | None = None  # the tree shipped on the shared claim (None: a ConfigMap or the image)
    returned_tree: str | None = None  # the tree id the pod printed for the workspace it left
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def stop_reading(self) -> None:
        with self.lock:
            response = self.response
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()


class KubernetesTaskRunner:
    """Runs plan tasks as Jobs in the deploy profile's namespace (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        profile: DeployProfile,
        api: client.ApiClient,
        *,
        run: str,
        emit: Callable[[wire.Event], Any] | None = None,
    ) -> None:
        if profile.tasks is None:  # open_runner refuses such a profile before it gets here
            raise ValueError("a deploy profile without [tasks] runs no plan tasks")
        self.profile = profile
        self.tasks = profile.tasks
        self.namespace = profile.cluster.namespace
        self.run_label = run
        self.api = api
        self.client = jobs.JobClient(api)
        self.emit = emit
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._in_flight: dict[str, _Attempt] = {}
        self._attempts: dict[str, int] = {}
        # With a claim named, every workspace travels on it (shared_tree.py); else in a ConfigMap.
        self.store = ObjectStore(Path(self.tasks.claim_mount), run) if self.tasks.claim is not None else None

    # -- the TaskRunner protocol ----------------------------------------------------------------

    def provides(self) -> frozenset[str]:
        return frozenset(self.tasks.capabilities)

    def refuses(self, task: Task, kind: TaskKindSpec) -> str | None:
        if not kind.remote:
            return f"a {task.kind} task cannot run as a Job (command and evaluate tasks can)"
        if kind.live_workdir and self.tasks.workspace != "pack":
            return (
                f"a {task.kind} judges the workspace as it stands, which an image-baked workspace is not "
                '(set [tasks].workspace = "pack")'
            )
        for path in task.emits_files:
            hidden = next((part for part in path.split("/") if part in PACK_SKIP), None)
            if hidden is not None:
                return (
                    f"its declared file {path!r} is or lies under {hidden}, which a Job never brings back "
                    "(the workspace's VCS, state and environment stay this machine's)"
                )
        if kind.returns_workspace and self.tasks.workspace != "pack":
            return (
                'its workspace must travel to the pod and back, which [tasks].workspace = "pack" '
                'does (the profile says "image")'
            )
        return None

    def run(self, context: TaskContext, kind: TaskKindSpec) -> Attempt:
        if self._cancel.is_set():
            return Attempt(Outcome.TRANSPORT, note="kubernetes: the run is stopping", transport="other")
        transport: list[str] = []

        def shell(
            command: str,
            env: Mapping[str, str],
            timeout: float,
            *,
            stdin: ShellStdin | None = None,
            returns_workspace: bool = False,
        ) -> Completed:
            return self._shell(context, command, env, timeout, transport, stdin, returns_workspace)

        attempt = kind.run(attrs.evolve(context, shell=shell))
        if attempt.outcome is Outcome.TRANSPORT and transport:
            return attrs.evolve(attempt, note=f"kubernetes: {transport[-1]}", transport="other")
        return attempt

    def cancel(self) -> None:
        """Delete every Job of this run, in flight or finished; attempts in flight return at once."""
        self._cancel.set()
        with self._lock:
            flying = list(self._in_flight.values())
        for attempt in flying:
            attempt.stop_reading()
        try:
            self.client.delete_run(self.namespace, self.run_label)
        except ClusterError as exc:
            self._note(f"could not delete the run's Jobs: {exc.message}", level="warn")
        if self.store is not None:
            self.store.drop_attempts()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.api.close()

    def reclaim(self) -> int:
        """Delete what a killed predecessor of this run left (its Jobs, ConfigMaps and attempts on the claim)."""
        if self.store is not None:
            self.store.drop_attempts()
        return self.client.delete_run(self.namespace, self.run_label)

    # -- one attempt ----------------------------------------------------------------------------

    def _next_name(self, task: str) -> str:
        with self._lock:
            number = self._attempts.get(task, 0) + 1
            self._attempts[task] = number
        prefix = f"{self.run_label[:24]}-{dns_label(task, 16)}".strip("-")
        return f"{prefix}-{number}-{secrets.token_hex(2)}"

    def _shell(
        self,
        context: TaskContext,
        command: str,
        env: Mapping[str, str],
        timeout: float,
        transport: list[str],
        stdin: ShellStdin | None = None,
        returns_workspace: bool = False,
    ) -> Completed:
        started = time.monotonic()
        task = context.task.name
        job = self._next_name(task)

        def lost(why: str) -> Completed:
            transport.append(why)
            return Completed(-1, "", "", False, time.monotonic() - started, spawn_error=why)

        attempt = _Attempt(self.namespace, job, None, declared=context.task.emits_files)
        try:
            spec, configmap, shipped = self._spec(
                context, attempt, command, env, timeout, stdin, returns_workspace
            )
        except ValueError as exc:
            if self.store is not None:
                self.store.drop_attempt(job)
            self._note(f"task {task}: {exc}", level="warn")
            return lost(str(exc))
        if configmap is not None:
            attempt.configmap = _workspace_map(job)
        attempt.log_limit = MAX_LOG_BYTES + MAX_ENCODED_CHARS * (returns_workspace + bool(attempt.declared))
        with self._lock:
            self._in_flight[job] = attempt
        try:
            if configmap is not None:
                self.client.create_configmap(self.namespace, configmap)
            self.client.create(spec)
            self._note(f"task {task}: running as Job {self.namespace}/{job}")
            done = self._follow(attempt, task, timeout, started, lost)
            if returns_workspace and done.ok:
                done = self._bring_back(context.workdir, attempt, shipped, done, task)
            if attempt.declared and done.spawn_error is None and not done.timed_out:
                done = self._bring_files(context.workdir, attempt, done, task)
            return done
        except ClusterError as exc:
            self._discard(attempt)
            return lost(exc.message)
        except _Cancelled:
            self._discard(attempt)
            return lost("the run is stopping; its Job was deleted")
        finally:
            with self._lock:
                self._in_flight.pop(job, None)
            if attempt.configmap is not None:
                with contextlib.suppress(ClusterError):
                    self.client.delete_configmap(self.namespace, attempt.configmap)
            if self.store is not None:
                self.store.drop_attempt(job)

    def _follow(
        self,
        attempt: _Attempt,
        task: str,
        timeout: float,
        started: float,
        lost: Callable[[str], Completed],
    ) -> Completed:
        pod, waiting = self._await_start(attempt.job)
        if pod is None:
            self._discard(attempt)
            return lost(waiting)
        watchdog = threading.Timer(timeout, self._deadline, args=(attempt,))
        watchdog.daemon = True
        watchdog.start()
        try:
            live = self._stream(attempt, pod, task)
            succeeded, reason = self._await_end(attempt)
        finally:
            watchdog.cancel()
        text = self._final_log(pod, attempt.log_limit) if reason != "Deleted" else None
        text = live if text is None else text
        if attempt.declared:  # printed last: split off first
            text, attempt.files = split_workspace(text, STDOUT_DELIMITER, FILES_DELIMITER)
        text, attempt.workspace = split_workspace(text, STDOUT_DELIMITER)
        text, returned = split_workspace(text, STDOUT_DELIMITER, TREE_DELIMITER)
        attempt.returned_tree = returned.strip() if returned is not None else None
        live_part, stdout, code = split_log(text)
        duration = time.monotonic() - started
        if attempt.timed_out:
            return Completed(-9, stdout or "", live_part, True, duration)
        if self._cancel.is_set():
            raise _Cancelled
        if succeeded:  # the Job completed: the container exited 0, whatever the log says
            return Completed(0, stdout or "", live_part, False, duration)
        pod_reasons = self._pod_reasons(attempt.job)
        cluster_reason = next((r for r in (*pod_reasons, reason) if r in jobs.TRANSPORT_REASONS), None)
        if cluster_reason is not None:
            self._discard(attempt)
            return lost(f"Job {attempt.job} failed for the cluster's reasons ({cluster_reason})")
        if reason == "Deleted":
            return lost(f"Job {attempt.job} was deleted while it ran")
        exit_code = self._exit_code(attempt.job)
        if stdout is None and exit_code == SETUP_FAILED:
            return lost(f"the pod of Job {attempt.job} could not lay out the task's workspace")
        if exit_code is None or exit_code == 0:  # failed, yet no nonzero exit recorded: not a pass
            exit_code = code if code else 1
        return Completed(exit_code, stdout or "", live_part, False, duration)

    def _bring_back(
        self, workdir: Path, attempt: _Attempt, shipped: tuple[str, ...], done: Completed, task: str
    ) -> Completed:
        """Lay the workspace the command left over `workdir`; a failed result saying why when it cannot."""
        try:
            if attempt.tree is not None and self.store is not None:
                returned = attempt.returned_tree or ""
                if not _TREE_ID.fullmatch(returned):
                    raise ReturnRefused(
                        f"the pod printed no tree id for the workspace it left ({returned[:60]!r})"
                    )
                extra = self.store.attempts / attempt.job / "objects"
                written, deleted = self.store.bring_back(workdir, attempt.tree, returned, extra)
            elif attempt.workspace is None:
                raise ReturnRefused("the pod printed no workspace after the command (its log was cut short)")
            else:
                written, deleted = bring_back(workdir, attempt.workspace, shipped, PACK_SKIP | {STDIN_NAME})
        except ReturnRefused as exc:
            self._note(f"task {task}: the workspace it left was refused: {exc}", level="warn")
            why = f"crucible: the workspace the command left was refused: {exc}"
            return attrs.evolve(done, exit_code=1, stderr=f"{done.stderr}\n{why}".lstrip("\n"))
        self._note(f"task {task}: its workspace came back ({written} file(s), {deleted} deleted)")
        return done

    def _bring_files(self, workdir: Path, attempt: _Attempt, done: Completed, task: str) -> Completed:
        """Write the declared files the pod printed into `workdir`; a failed result saying why when refused."""
        try:
            if attempt.files is None:
                raise ReturnRefused(
                    "the pod printed no declared files after the command (its log was cut short)"
                )
            written, _ = bring_back_files(workdir, attempt.files, attempt.declared)
        except ReturnRefused as exc:
            self._note(f"task {task}: its declared files were refused: {exc}", level="warn")
            why = f"crucible: the declared files the command left were refused: {exc}"
            code = done.exit_code if done.exit_code != 0 else 1
            return attrs.evolve(done, exit_code=code, stderr=f"{done.stderr}\n{why}".lstrip("\n"))
        missing = len(attempt.declared) - written
        self._note(
            f"task {task}: {written} declared file(s) came back"
            + (f", {missing} absent in the pod" if missing else "")
        )
        return done

    def _spec(
        self,
        context: TaskContext,
        attempt: _Attempt,
        command: str,
        env: Mapping[str, str],
        timeout: float,
        stdin: ShellStdin | None = None,
        returns_workspace: bool = False,
    ) -> tuple[jobs.TaskSpec, client.V1ConfigMap | None, tuple[str, ...]]:
        tasks = self.tasks
        job = attempt.job
        task_env = {k: env[k] for k in (*FORWARDED_ENV, *FORWARDED_TURN_ENV) if k in env}
        if WORKSPACE_ENV in env:
            task_env[WORKSPACE_ENV] = ""  # the pod script sets it to its workdir
        if stdin is not None and stdin.file_env is not None:
            if not _ENV_NAME.fullmatch(stdin.file_env):
                raise ValueError(f"{stdin.file_env!r} is not a variable name")
            task_env["CRUCIBLE_TASK_STDIN_ENV"] = stdin.file_env
        if returns_workspace:
            task_env["CRUCIBLE_TASK_RETURN"] = "1"
        files = env.get(INPUT_FILES_ENV)
        if files:  # staged under the workspace, so the pack carries them: point at the pod's copy
            with contextlib.suppress(ValueError):
                rel = Path(files).resolve().relative_to(context.workdir.resolve())
                task_env[INPUT_FILES_ENV] = f"{tasks.workdir.rstrip('/')}/{rel.as_posix()}"
        task_env.update(tasks.env)
        task_env.update(
            {
                "CRUCIBLE_TASK_COMMAND": command,
                "CRUCIBLE_TASK_WORKDIR": tasks.workdir,
                "CRUCIBLE_TASK_PACK": "",
            }
        )
        labels = {**self.profile.labels, TASK_LABEL: dns_label(context.task.name, 63)}
        configmap = None
        items: tuple[tuple[str, str, int], ...] = ()
        shipped: tuple[str, ...] = ()
        share: tuple[tuple[str, str, bool], ...] = ()
        if tasks.workspace == "pack" and self.store is not None:
            share = self._ship(context, attempt, stdin)
            task_env.update(
                {
                    "CRUCIBLE_TASK_TREE": str(attempt.tree),
                    "CRUCIBLE_TASK_OBJECTS": jobs.SHARE_OBJECTS,
                    "CRUCIBLE_TASK_ATTEMPT": jobs.SHARE_ATTEMPT,
                }
            )
        elif tasks.workspace == "pack":
            configmap, items = self._pack(
                context.workdir, _workspace_map(job), labels, stdin.data if stdin is not None else None
            )
            shipped = tuple(rel for _, rel, _ in items if rel != STDIN_NAME)
            task_env["CRUCIBLE_TASK_PACK"] = jobs.PACK_MOUNT
        elif stdin is not None or returns_workspace:
            raise ValueError(
                'a command with input or a workspace to bring back needs [tasks].workspace = "pack"'
            )
        needs = context.task.needs
        spec = jobs.TaskSpec(
            name=job,
            namespace=self.namespace,
            run=self.run_label,
            image=tasks.image or self.profile.image.loop,
            command=("/bin/sh", "-c", TASK_SCRIPT, "crucible-task", *context.task.emits_files),
            env=task_env,
            deadline_seconds=int(tasks.schedule_timeout + timeout) + BACKSTOP_SLACK,
            gpu=tasks.gpu if needs == "gpu" else 0,
            cpu=tasks.cpu,
            memory=tasks.memory,
            service_account=tasks.service_account,
            node_selector=dict(tasks.node_selector.get(needs, {})),
            pull_secret=self.profile.image.pull_secret,
            secret_env=tuple((e.name, e.secret, e.key) for e in tasks.secret_env),
            labels=labels,
            pack_configmap=_workspace_map(job) if configmap is not None else None,
            pack_items=items,
            share_claim=tasks.claim if share else None,
            share_mounts=share,
        )
        return spec, configmap, shipped

    def _ship(
        self, context: TaskContext, attempt: _Attempt, stdin: ShellStdin | None
    ) -> tuple[tuple[str, str, bool], ...]:
        """Write the workspace's tree to the run's store on the claim, and the attempt's prompt
        beside it: the Job's mounts of the claim (the store read-only, the attempt's directory)."""
        assert self.store is not None
        try:
            shipped = self.store.ship(context.workdir)
            directory = self.store.attempt_dir(attempt.job)
            if stdin is not None:
                (directory / "stdin").write_bytes(stdin.data)
        except OSError as exc:  # the claim is full, gone or not mounted here
            raise ValueError(
                f"could not write the workspace to claim {self.tasks.claim} at {self.tasks.claim_mount}: {exc}"
            ) from None
        attempt.tree = shipped.tree
        written = shipped.written + (len(stdin.data) if stdin is not None else 0)
        self._note(
            f"task {context.task.name}: workspace on claim {self.tasks.claim} as tree {shipped.tree} "
            f"({shipped.files} files, {written} bytes written)"
        )
        base = self.store.sub_path
        return (
            (f"{base}/objects", jobs.SHARE_OBJECTS, True),
            (f"{base}/attempts/{attempt.job}", jobs.SHARE_ATTEMPT, False),
        )

    def _pack(
        self, workdir: Path, name: str, labels: dict[str, str], stdin: bytes | None = None
    ) -> tuple[client.V1ConfigMap, tuple[tuple[str, str, int], ...]]:
        files = pack_workspace(workdir, stdin)
        data: dict[str, str] = {}
        binary: dict[str, bytes | str] = {}
        items: list[tuple[str, str, int]] = []
        for index, (rel, raw, mode) in enumerate(files):
            key = f"f{index:04d}-{hashlib.sha1(rel.encode()).hexdigest()[:12]}"
            try:
                data[key] = raw.decode("utf-8")
            except UnicodeDecodeError:
                binary[key] = base64.b64encode(raw).decode("ascii")
            items.append((key, rel, mode))
        meta_labels = {
            **labels,
            L.MANAGED_BY_KEY: L.MANAGED_BY_VALUE,
            L.RUN_LABEL: self.run_label,
            L.MODE_LABEL: "task",
        }
        configmap = client.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=client.V1ObjectMeta(name=name, namespace=self.namespace, labels=meta_labels),
            data=data or None,
            binary_data=binary or None,
        )
        return configmap, tuple(items)

    def _sleep(self, seconds: float) -> None:
        if self._cancel.wait(seconds):
            raise _Cancelled

    def _await_start(self, job: str) -> tuple[str | None, str]:
        """The Job's pod once it runs (or already ended), or None and why it never started."""
        deadline = time.monotonic() + self.tasks.schedule_timeout
        pause = POLL_FIRST
        last = "no pod yet"
        while time.monotonic() < deadline:
            current = self.client.read(self.namespace, job)
            if current is None:
                return None, f"Job {job} was deleted before its pod started"
            for condition in (current.status.conditions or []) if current.status else []:
                if condition.type == "Failed" and condition.status == "True":
                    reason = condition.reason or "Failed"
                    pods = self.client.pods(self.namespace, job)
                    if pods:  # it ran and failed fast: the caller reads why
                        return pods[0].metadata.name, ""
                    return None, f"Job {job} failed before its pod started ({reason})"
            for pod in self.client.pods(self.namespace, job):
                status = pod.status
                phase = (status.phase if status else None) or "Pending"
                if phase in ("Running", "Succeeded", "Failed"):
                    return pod.metadata.name, ""
                waiting = _waiting_reason(pod)
                if waiting in STUCK_REASONS:
                    return None, f"the pod of Job {job} cannot start: {waiting}"
                last = waiting or (status.reason if status and status.reason else phase)
            self._sleep(pause)
            pause = min(POLL_MAX, pause * 2)
        return None, f"Job {job} was not scheduled within {self.tasks.schedule_timeout:g}s (last: {last})"

    def _stream(self, attempt: _Attempt, pod: str, task: str) -> str:
        """Follow the pod's log until it ends: notes for its first lines, the text kept (bounded)."""
        response = self.client.open_log(self.namespace, pod, follow=True)
        with attempt.lock:
            attempt.response = response
        kept = bytearray()
        pending = b""
        noted = skipped = 0
        in_stdout = False
        try:
            with contextlib.suppress(Exception):  # a stream cut short (closed, node gone) just ends
                for chunk in response.stream(64 * 1024):
                    kept += chunk
                    if len(kept) > attempt.log_limit:
                        del kept[: len(kept) - attempt.log_limit]
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for raw in lines:
                        line = raw.decode("utf-8", "replace")
                        if line.startswith(STDOUT_DELIMITER):
                            in_stdout = True  # what follows repeats stdout already shown
                        if in_stdout or not line.strip():
                            continue
                        if noted < self.tasks.log_lines:
                            self._note(f"task {task} | {line[:MAX_NOTE_CHARS]}")
                            noted += 1
                        else:
                            skipped += 1
                    if len(pending) > MAX_LOG_BYTES:
                        pending = pending[-MAX_LOG_BYTES:]
        finally:
            with attempt.lock:
                attempt.response = None
            with contextlib.suppress(Exception):
                response.release_conn()
        if skipped:
            self._note(f"task {task}: {skipped} more log line(s) not copied here ([tasks].log_lines)")
        if self._cancel.is_set() and not attempt.timed_out:
            raise _Cancelled
        return kept.decode("utf-8", "replace")

    def _await_end(self, attempt: _Attempt) -> tuple[bool, str | None]:
        """Poll the Job until it completes, fails or is gone: (succeeded, failure reason)."""
        pause = POLL_FIRST
        while True:
            current = self.client.read(self.namespace, attempt.job)
            if current is None:
                return False, "Deleted"
            for condition in (current.status.conditions or []) if current.status else []:
                if condition.status != "True":
                    continue
                if condition.type == "Complete":
                    return True, None
                if condition.type == "Failed":
                    return False, condition.reason or "Failed"
            if attempt.timed_out:
                return False, "Deleted"
            self._sleep(pause)
            pause = min(POLL_MAX, pause * 2)

    def _final_log(self, pod: str, limit: int = MAX_LOG_BYTES) -> str | None:
        """The pod's whole log once it ended (its last `limit` bytes), or None when unreadable."""
        try:
            response = self.client.open_log(self.namespace, pod, follow=False)
        except ClusterError:
            return None
        kept = bytearray()
        try:
            for chunk in response.stream(64 * 1024):
                kept += chunk
                if len(kept) > limit:
                    del kept[: len(kept) - limit]
        except Exception:
            return None
        finally:
            with contextlib.suppress(Exception):
                response.release_conn()
        return kept.decode("utf-8", "replace")

    def _deadline(self, attempt: _Attempt) -> None:
        """The task's deadline passed while its pod ran: delete the Job, stop reading its log."""
        attempt.timed_out = True
        with contextlib.suppress(ClusterError):
            self.client.delete(self.namespace, attempt.job)
        attempt.stop_reading()

    def _discard(self, attempt: _Attempt) -> None:
        with contextlib.suppress(ClusterError):
            self.client.delete(self.namespace, attempt.job)

    def _pod_reasons(self, job: str) -> list[str]:
        with contextlib.suppress(ClusterError):
            return [
                p.status.reason for p in self.client.pods(self.namespace, job) if p.status and p.status.reason
            ]
        return []

    def _exit_code(self, job: str) -> int | None:
        with contextlib.suppress(ClusterError):
            for pod in self.client.pods(self.namespace, job):
                for status in (pod.status.container_statuses or []) if pod.status else []:
                    terminated = status.state.terminated if status.state else None
                    if terminated is not None and terminated.exit_code is not None:
                        return int(terminated.exit_code)
        return None

    def _note(self, message: str, level: str = "info") -> None:
        if self.emit is not None:
            self.emit(wire.Note(msg=message, level=level))


def _workspace_map(job: str) -> str:
    """The ConfigMap carrying one attempt's workspace."""
    return f"{job}-ws"


def _waiting_reason(pod: Any) -> str | None:
    for status in (pod.status.container_statuses or []) if pod.status else []:
        if status.state and status.state.waiting and status.state.waiting.reason:
            return str(status.state.waiting.reason)
    return None


def run_label(context: TaskRunnerContext) -> str:
    """This run's label: its name plus a digest of its state dir, so a resume finds its own Jobs."""
    digest = hashlib.sha256(str(context.state_dir.resolve()).encode()).hexdigest()[:8]
    return f"{dns_label(context.run_name, 24)}-{digest}"


def profile_path(context: TaskRunnerContext) -> Path | None:
    """The deploy profile this run names: the command line's, else `[deploy].profile`."""
    if context.deploy_profile is not None:
        return context.deploy_profile
    deploy: DeploySettings | None = context.deploy
    if deploy is not None and deploy.profile is not None:
        return (context.base_dir / deploy.profile).resolve()
    return None


def open_runner(context: TaskRunnerContext) -> KubernetesTaskRunner | None:
    """The runner a plan run configured with a deploy profile; None when it names none."""
    path = profile_path(context)
    if path is None:
        return None
    profile = load_profile(path)
    if profile.tasks is None:
        raise ManifestError(
            f"deploy profile {path} has no [tasks] section, so its cluster runs no plan tasks",
            hint='add [tasks] with capabilities = ["gpu"] (docs/kubernetes.md#plan-tasks-as-jobs)',
        )
    if context.offline:  # plan show: only provides/refuses are asked; the client never calls out
        return KubernetesTaskRunner(profile, client.ApiClient(), run=run_label(context))
    tasks = profile.tasks
    if tasks.claim is not None and not Path(tasks.claim_mount).is_dir():
        raise ManifestError(
            f"[tasks].claim {tasks.claim!r} of deploy profile {path} is not mounted here: "
            f"{tasks.claim_mount} is not a directory",
            hint="mount the claim there (deploy render does, in the loop pod), set [tasks].claim_mount to where "
            "it is mounted, or drop [tasks].claim (workspaces then travel in ConfigMaps of at most 900 KiB)",
        )
    deploy: DeploySettings | None = context.deploy
    kubeconfig: Path | None = None
    if deploy is not None and deploy.kubeconfig is not None:
        kubeconfig = (context.base_dir / Path(deploy.kubeconfig).expanduser()).resolve()
    elif context.env.get("KUBECONFIG"):
        kubeconfig = Path(context.env["KUBECONFIG"])
    api = cluster.connect(kubeconfig, deploy.context if deploy is not None else None)
    runner = KubernetesTaskRunner(profile, api, run=run_label(context), emit=context.emit)
    try:
        left = runner.reclaim()
    except ClusterError:
        runner.close()
        raise
    if left:
        runner._note(f"kubernetes: deleted {left} Job(s) an earlier process of this run left behind")
    return runner
