"""The `openshell` backend: one fresh OpenShell sandbox per agent turn, deleted on every path.

A turn: reach the gateway, create a sandbox from `sandbox_image` with the resolved egress
policy (and the gateway-held provider credentials the manifest names), wait until it is
ready, upload the workspace and the harness's private files, run the harness's command and
stream its events back as they arrive, download the edits into the workspace, save the
harness's conversation store, and delete the sandbox. The engine side (measure, snapshot,
restore) never runs in the sandbox.

Failures of the transport (the gateway, the sandbox, moving files, the stream) come back as
SPAWN or STREAM, which do not spend the iteration; what the agent itself did is classified
by the harness as on the host.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_backend_openshell import runs
from crucible_backend_openshell.egress import ResolvedEgress, resolve_egress
from crucible_backend_openshell.services import ServiceNeed, bearer_forward, mcp_entry
from crucible_backend_openshell.settings import Endpoint, OpenShellSettings
from crucible_backend_openshell.transfer import TransferError, pack_files, pack_workspace, sync_back
from crucible_core.api import (
    BackendContext,
    Completed,
    EgressReach,
    FailureClass,
    ManifestError,
    SandboxCommand,
    SandboxHarness,
    SandboxLayout,
    Turn,
    TurnResult,
)

if TYPE_CHECKING:
    from crucible_backend_openshell.gateway import Gateway, TransportFailure

LAYOUT = SandboxLayout(workdir="/sandbox/workspace", home="/sandbox", private="/sandbox/.crucible")
# Engine variables that mean the same inside the sandbox; the rest of CRUCIBLE_* name host paths.
_ENGINE_VARS = ("CRUCIBLE_ITERATION", "CRUCIBLE_REGIME")
_HELPER_OUTPUT_LIMIT = 64 * 1024
_MAX_LINE_BYTES = 8 * 1024 * 1024
_STDERR_TAIL = 8000


def sandbox_name(run_id: str, iteration: int) -> str:
    safe = "".join(c if c.isalnum() else "-" for c in run_id.lower())[:40]
    return f"crucible-{safe}-{iteration}-{secrets.token_hex(3)}"


def sandbox_env(turn_env: Mapping[str, str], disclosed: Mapping[str, str]) -> dict[str, str]:
    """What the sandbox's program may see: [agent].env (the disclosed variables) and a few engine facts.

    Never the engine's own environment: its credentials, tokens and host paths stay home.
    """
    env = {"CRUCIBLE_WORKSPACE": LAYOUT.workdir}  # PATH and the rest are the image's
    env.update({k: turn_env[k] for k in _ENGINE_VARS if k in turn_env})
    env.update({k: turn_env.get(k, v) for k, v in disclosed.items()})
    return env


def _gateway_endpoint(gateway: str | None) -> Endpoint | None:
    if gateway is None:
        return None
    host, _, port = gateway.rpartition(":")
    return Endpoint(host.strip("[]"), int(port), "full")


@attrs.define
class OpenShellBackend:
    settings: OpenShellSettings
    harness: SandboxHarness
    disclosed_env: Mapping[str, str]  # [agent].env: the only variables that enter the sandbox
    workspace: Path
    private_dir: Path
    excluded: tuple[str, ...]  # workspace-relative engine paths that never travel
    environ: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    # What the harness's own program needs to reach (its `sandbox_egress()`), added to its sandboxes.
    harness_reach: EgressReach | None = None

    @classmethod
    def from_context(cls, ctx: BackendContext) -> OpenShellBackend:
        settings = ctx.settings
        if not isinstance(settings, OpenShellSettings):
            raise ManifestError('backend = "openshell" needs [agent].sandbox_image')
        if settings.openshell.credentials.startswith("env:"):
            name = settings.openshell.credentials[4:]
            if not os.environ.get(name):
                raise ManifestError(
                    f"[agent.openshell].credentials names {name}, which is not set for the engine",
                    hint=f"export {name} with the gateway's bearer token, or change credentials",
                )
        harness = ctx.resolve_harness(ctx.harness_name)
        if not isinstance(harness, SandboxHarness):
            raise ManifestError(
                f"harness {ctx.harness_name!r} cannot run inside an OpenShell sandbox",
                hint='use a harness that can run in a sandbox (claude, codex, opencode, pi or acp) with backend = "openshell"',
            )
        state_dir = ctx.private_dir.parent
        excluded = ["RESULTS.md", "ESCALATION.json", "PROVISIONING_PENDING.json"]
        with contextlib.suppress(ValueError):
            excluded.append(state_dir.resolve().relative_to(ctx.workspace.resolve()).as_posix() + "/")
        needs = getattr(harness, "sandbox_egress", None)
        reach = needs() if callable(needs) else None
        return cls(
            settings,
            harness,
            dict(ctx.agent.env),
            ctx.workspace,
            ctx.private_dir,
            tuple(excluded),
            harness_reach=reach if isinstance(reach, EgressReach) else None,
        )

    def preflight(self, env: Mapping[str, str], workspace: Path | None) -> list[str]:
        """What the harness says would stop its sandboxed turn before any sandbox is made (a
        credential it resolves on this host); its program is the image's, so it is not looked for here."""
        check = getattr(self.harness, "sandbox_preflight", None)
        return list(check(env)) if callable(check) else []

    def resolved_egress(self, services: Sequence[ServiceNeed] = ()) -> ResolvedEgress:
        endpoint = _gateway_endpoint(self.settings.openshell.gateway)
        forwards = [(need.name, endpoint) for need in services if endpoint is not None]
        return resolve_egress(self.settings.openshell, forwards, self.harness_reach)

    def services_for(self, turn: Turn) -> tuple[ServiceNeed, ...]:
        """The run services this turn needs, from the engine's forwards: each one's own loopback
        port, its per-run bearer and (for an MCP service) its path. The engine-side forward and
        handoff paths are host addresses, so the sandbox gets a gateway exposure instead."""
        return tuple(
            ServiceNeed(
                forward.service,
                forward.port,
                forward.bearer,
                forward.mcp_path if forward.mcp_server is not None else "",
            )
            for forward in turn.services
        )

    def run_turn(self, turn: Turn) -> TurnResult:
        return self.run_turn_with(turn, self.services_for(turn))

    def run_turn_with(self, turn: Turn, services: Sequence[ServiceNeed]) -> TurnResult:
        try:
            from crucible_backend_openshell.gateway import Gateway, TransportFailure
        except ImportError as exc:  # the SDK or grpc is missing or broken in this environment
            return TurnResult(False, FailureClass.SPAWN, note=f"the openshell SDK cannot be imported: {exc}")
        run_id = runs.run_id_for(self.private_dir)
        name = sandbox_name(run_id, turn.iteration)
        try:
            gateway = Gateway(self.settings.openshell, self.environ)
        except TransportFailure as exc:
            return _transport(exc)
        with contextlib.ExitStack() as stack:
            stack.callback(gateway.close)
            try:
                gateway.check_reachable()
                forwards = [(need, stack.enter_context(bearer_forward(need))) for need in services]
                egress = self.resolved_egress(services)
                # Registered before the create call, so every path out deletes the sandbox.
                stack.callback(_delete_quietly, gateway, run_id, name)
                runs.opened(run_id, name)
                gateway.create(
                    name,
                    image=self.settings.sandbox_image,
                    egress=egress,
                    providers=self.settings.openshell.providers,
                    labels={"crucible.run-id": run_id, "crucible.iteration": str(turn.iteration)},
                )
                gateway.wait_ready(name)
                servers = dict(turn.mcp_servers)
                for need, port in forwards:
                    servers[f"service.{need.name}"] = mcp_entry(
                        need, gateway.expose(name, f"svc-{need.name}", port)
                    )
                boxed = attrs.evolve(turn, env=sandbox_env(turn.env, self.disclosed_env), mcp_servers=servers)
                command = self.harness.sandbox_command(boxed, LAYOUT)
                if isinstance(command, TurnResult):
                    return command
                return self._run_in(gateway, name, turn, command)
            except TransportFailure as exc:
                return _transport(exc)
            except TransferError as exc:
                return TurnResult(False, FailureClass.SPAWN, note=f"openshell: {exc}")

    def _run_in(self, gateway: Gateway, name: str, turn: Turn, command: SandboxCommand) -> TurnResult:
        limit = self.settings.openshell.max_transfer_bytes
        packed = pack_workspace(self.workspace, self.excluded, limit)
        place = 'mkdir -p "$1" && tar -x -f - -C "$1"'
        gateway.run(
            name,
            ["sh", "-c", place, "sh", LAYOUT.workdir],
            stdin=packed.data,
            stage="workspace",
            limit=_HELPER_OUTPUT_LIMIT,
        )
        private = self._private_files(command, turn)
        if private:
            unpack = 'umask 077 && mkdir -p "$1" && tar -x -p -f - -C "$2"'
            gateway.run(
                name,
                ["sh", "-c", unpack, "sh", LAYOUT.private, LAYOUT.home],
                stdin=private,
                stage="workspace",
                limit=_HELPER_OUTPUT_LIMIT,
            )
        completed = self._execute(gateway, name, turn, command)
        edits = gateway.run(
            name,
            ["tar", "-c", "-f", "-", "-C", LAYOUT.workdir, "--exclude=./.git", "."],
            stage="stream",
            limit=limit,
        )
        try:
            sync_back(edits, self.workspace, packed.paths, self.excluded, limit)
        except TransferError as exc:
            return TurnResult(
                False, FailureClass.STREAM, note=f"openshell: the edits could not come back: {exc}"
            )
        self._save_sessions(gateway, name, turn, command)
        return command.finish(completed)

    # -- the harness's private files ------------------------------------------------------------

    def _session_store(self, session: str) -> Path:
        import hashlib

        digest = hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]
        return self.private_dir / "openshell" / "sessions" / f"{digest}.tar"

    def _private_files(self, command: SandboxCommand, turn: Turn) -> bytes | None:
        """The command's 0600 files and the saved conversation store, as one archive rooted at home."""
        import io
        import tarfile

        files = {_under_home(path): (data, 0o600) for path, data in command.files.items()}
        store = self._session_store(turn.session) if turn.session and command.session_dirs else None
        if not files and (store is None or not store.exists()):
            return None
        archive = io.BytesIO(pack_files(files)) if files else io.BytesIO()
        if store is not None and store.exists():
            # Append the saved store (its members are rooted at home too, files mode 0600).
            merged = io.BytesIO()
            with tarfile.open(fileobj=merged, mode="w") as out:
                for source in ([archive] if files else []) + [store.open("rb")]:
                    source.seek(0)
                    with tarfile.open(fileobj=source, mode="r:") as src:
                        for member in src.getmembers():
                            data = src.extractfile(member) if member.isfile() else None
                            out.addfile(member, data)
            return merged.getvalue()
        return archive.getvalue()

    def _save_sessions(self, gateway: Gateway, name: str, turn: Turn, command: SandboxCommand) -> None:
        if not turn.session or not command.session_dirs:
            return
        dirs = [_under_home(d) for d in command.session_dirs]
        script = 'cd "$1" && shift && for d in "$@"; do [ -d "$d" ] && printf "%s\\n" "$d"; done | tar -c -f - -T - --mode=go-rwx'
        data = gateway.run(
            name,
            ["sh", "-c", script, "sh", LAYOUT.home, *dirs],
            stage="stream",
            limit=self.settings.openshell.max_transfer_bytes,
        )
        store = self._session_store(turn.session)
        store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in (store.parent.parent, store.parent):
            os.chmod(folder, 0o700)
        tmp = store.with_name(f".{store.name}.tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, store)

    # -- the harness's command ------------------------------------------------------------------

    def _execute(self, gateway: Gateway, name: str, turn: Turn, command: SandboxCommand) -> Completed:
        started = time.monotonic()
        pending = b""
        stderr = bytearray()
        exit_code: int | None = None
        timed_out = False
        for kind, data in gateway.stream(
            name,
            command.argv,
            workdir=LAYOUT.workdir,
            env=command.env,
            stdin=command.stdin,
            timeout=turn.deadline_seconds,
        ):
            if kind == "stdout":
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    command.on_stdout_line(line.decode("utf-8", errors="replace"))
                if len(pending) > _MAX_LINE_BYTES:
                    command.on_stdout_line(pending[:_MAX_LINE_BYTES].decode("utf-8", errors="replace"))
                    pending = b""
            elif kind == "stderr":
                stderr += data
                del stderr[:-_STDERR_TAIL]
            elif kind == "exit":
                exit_code = int(data)
            elif kind == "deadline":
                timed_out = True
        if pending:
            command.on_stdout_line(pending.decode("utf-8", errors="replace"))
        duration = time.monotonic() - started
        deadline = turn.deadline_seconds
        if deadline is not None and duration >= deadline and exit_code != 0:
            timed_out = True  # the gateway killed it at execution_timeout
        return Completed(
            exit_code if exit_code is not None else -9,
            stdout="",
            stderr=stderr.decode("utf-8", errors="replace"),
            timed_out=timed_out,
            duration=duration,
        )


def _under_home(path: str) -> str:
    """A sandbox path as relative to the sandbox home; private files never land elsewhere."""
    from pathlib import PurePosixPath

    relative = PurePosixPath(path).relative_to(LAYOUT.home)
    if ".." in relative.parts or not relative.parts:
        raise ValueError(f"{path} is not a file under {LAYOUT.home}")
    return relative.as_posix()


def _transport(exc: TransportFailure) -> TurnResult:
    failure = FailureClass.STREAM if exc.stage == "stream" else FailureClass.SPAWN
    return TurnResult(False, failure, note=f"openshell {exc.stage}: {exc}")


def _delete_quietly(gateway: Gateway, run_id: str, name: str) -> None:
    """Delete on every path; a failure here is left to the run-end sweep (same label)."""
    from crucible_backend_openshell.gateway import with_retries

    with contextlib.suppress(Exception):
        with_retries(lambda: gateway.delete(name))
        runs.closed(run_id, name)
