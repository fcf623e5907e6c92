"""The lifecycle of a run's services: start on first need, probe readiness, restart within a bound, stop.

One instance per service, shared by every task that needs it. The executor calls `prepare`
just before each attempt of a task that needs a service (from a worker thread) and gets either
the environment that task may see or a transport-failure note; `close` stops everything with a
signal, a grace period, then a kill. Children go through the supervisor, so the guard kills
them if the engine dies; a resumed run is a new process and starts new instances.

How an instance is reached and when it is ready belongs to its catalog transport, served by a
plugin (`ServiceTransport`, crucible_register_service_transports): the runtime hands it the
started tool and the bearer it minted, and gets back the forward tasks use and a readiness probe.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from crucible_core import process
from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.protocols import ServedTool, ServiceEndpoint, ServiceTransport
from crucible_core.services.catalog import Transport, digest_problem
from crucible_core.services.resolve import Resolution, ResolvedService

RUN_ID_ENV = "CRUCIBLE_RUN_ID"
PORT_ENV = "CRUCIBLE_SERVICE_PORT"
HANDOFF_ENV = "CRUCIBLE_SERVICE_HANDOFF_DIR"
PROBE_INTERVAL = 0.1
RECLAIM_TIMEOUT = 300.0  # a catalog reclaim command (deleting a cluster, say) that outlives this is killed
# What a service's process inherits from the engine besides its own secrets: enough to run.
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServiceForward:
    """How one task reaches one service: the seam a sandboxing backend maps onto its own forward.

    url: the forward (never the service's own port); bearer: required by the forward;
    mcp_server: the name an agent turn sees it under when the transport is MCP, else None.
    handoff: (variable, path) of a credential the service handed over for needing tasks.
    """

    service: str
    url: str
    bearer: str = attrs.field(repr=False)
    mcp_server: str | None = None
    handoff: tuple[str, str] | None = None
    # For a backend with a forward of its own (openshell's ServiceNeed takes these three):
    port: int = 0  # the service's own loopback port
    mcp_path: str = "/mcp"

    def env(self) -> dict[str, str]:
        key = self.service.upper()
        found = {f"CRUCIBLE_SERVICE_{key}_URL": self.url, f"CRUCIBLE_SERVICE_{key}_TOKEN": self.bearer}
        if self.handoff is not None:
            found[self.handoff[0]] = self.handoff[1]
        return found

    def mcp_config(self) -> dict[str, object]:
        """An agent turn's MCP server entry (streamable HTTP through the forward, with the bearer)."""
        return {"type": "http", "url": self.url, "headers": {"Authorization": f"Bearer {self.bearer}"}}


class ServiceUnavailable(Exception):
    """This attempt cannot reach the service: a transport failure of the attempt, never of the run."""


def mint_bearer() -> str:
    """A fresh per-run, per-service credential the forward requires (C-SERVICE-REACH)."""
    return secrets.token_urlsafe(32)


def free_loopback_port() -> int:
    """A free loopback port, held for the tool that will bind it by number.

    A port merely bound and closed again is free for anything on the machine in the seconds before
    the tool binds it: another process's bind to port 0 (another run's service, which would then
    answer this run's readiness probe) or an outgoing connection's local end. So the port is left
    in TIME_WAIT: the accepting end of one loopback connection closes first. For about a minute the
    kernel hands it neither to a bind to port 0 nor to a connection, while a server binding it by
    number with SO_REUSEADDR (asyncio, uvicorn, Go, Node, Rust's standard library) still can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the accepted end inherits it
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = int(listener.getsockname()[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5.0):
            accepted, _ = listener.accept()
            accepted.close()  # the end that closes first is the one left waiting, on `port`
    return port


@value_methods
@attrs.define(repr=False, eq=False)
class _Instance:
    service: ResolvedService
    child: process.Background
    endpoint: ServiceEndpoint  # the transport's forward (and relay) and readiness probe
    ready: bool = False


class ServiceRuntime:
    def __init__(
        self,
        resolution: Resolution,
        *,
        run_id: str,
        state_dir: Path,
        emit: Callable[[wire.Event], object],
        env: Mapping[str, str],
        transports: Mapping[str, ServiceTransport],
    ) -> None:
        self.resolution = resolution
        self._transports = transports  # catalog transport name -> the plugin serving it
        self.run_id = run_id
        self.dir = state_dir / "services"
        self._emit_raw = emit
        self._env = env
        self._lock = threading.Lock()  # one start/probe at a time; the shared instance is the point
        self._emit_lock = threading.Lock()
        self._instances: dict[str, _Instance] = {}
        self._starts: dict[str, int] = {}
        self._suspended: dict[str, int] = {}  # stops for a suspend: their next start is no restart
        self._bearers: dict[str, str] = {}
        self._closed = False

    # -- what the executor asks ----------------------------------------------------------

    def provides(self) -> frozenset[str]:
        return self.resolution.available()

    def unavailable(self) -> dict[str, str]:
        return self.resolution.unavailable()

    def prepare(self, capability: str, task: str) -> ServiceForward:
        """Make sure the service is up and ready; the forward this task uses. Raises ServiceUnavailable."""
        service = self.resolution.by_capability(capability)
        if service is None or not service.available:
            raise ServiceUnavailable(f"{capability} is not available")
        with self._lock:
            if self._closed:
                raise ServiceUnavailable("the run is stopping")
            instance = self._instances.get(service.name)
            if instance is not None and instance.child.poll() is not None:
                self._reap(instance, note="exited before a dispatch that needs it")
                instance = None
            if instance is None:
                instance = self._start(service, task)
            if not instance.ready:
                self._await_ready(instance)
            return self._forward_of(instance)

    def reach(self, capability: str, task: str) -> tuple[dict[str, str], dict[str, object]] | str:
        """The plan executor's view (plan/kinds.py ServiceGate): (task env, MCP servers) or a failure note."""
        try:
            forward = self.prepare(capability, task)
        except ServiceUnavailable as exc:
            return str(exc)
        servers: dict[str, object] = {forward.mcp_server: forward.mcp_config()} if forward.mcp_server else {}
        return forward.env(), servers

    def one_at_a_time(self, capability: str) -> bool:
        service = self.resolution.by_capability(capability)
        return service is not None and service.entry is not None and not service.entry.concurrent_clients

    def still_up(self, capability: str) -> bool:
        """Whether the instance a just-finished attempt used is still running (else: transport failure)."""
        service = self.resolution.by_capability(capability)
        instance = self._instances.get(service.name) if service else None
        return instance is not None and instance.child.poll() is None

    def reclaim(self, names: list[str]) -> None:
        """Reclaim what services a killed predecessor left behind created, when this process never
        started them (no remaining task needed them).

        Only for tools whose entry says they create resources outside the run supervisor. With
        the entry's `reclaim_args`, the attested executable runs once with them and the run id,
        and no service is started: no task needs one. Without them the only way left is a fresh
        instance with the same run id, started and stopped, which reclaims on start or on stop
        (docs/services.md names this deviation). Failures are recorded, never raised.
        """
        for name in names:
            service = next((s for s in self.resolution.services if s.name == name), None)
            if service is None or not service.available or service.entry is None:
                continue
            if not service.entry.creates_external_resources or name in self._starts:
                continue
            if service.entry.reclaim_args is not None:
                self._run_reclaim(service, service.entry.reclaim_args)
                continue
            try:
                self.prepare(service.declaration.capability, "")
            except ServiceUnavailable:
                continue

    def suspend(self, note: str) -> None:
        """The run parks (a pause, an approval wait, a distress): stop every instance as at the end,
        but let the next need start a new one; a stop for a suspend does not count as a restart."""
        with self._lock:
            for instance in list(self._instances.values()):
                self._stop(instance, note=note)
                self._suspended[instance.service.name] = self._suspended.get(instance.service.name, 0) + 1

    def close(self) -> None:
        """Stop every instance: signal, the grace period, then kill. Idempotent."""
        with self._lock:
            self._closed = True
            for instance in list(self._instances.values()):
                self._stop(instance)

    # -- internals -----------------------------------------------------------------------

    def _emit(self, event: wire.Event) -> None:
        with self._emit_lock:
            self._emit_raw(event)

    def _forward_of(self, instance: _Instance) -> ServiceForward:
        entry = instance.service.entry
        assert entry is not None
        mcp = entry.transport.mcp
        handoff = None
        if entry.handoff is not None:
            handoff = (entry.handoff.env, str(self._handoff_dir(instance.service.name) / entry.handoff.file))
        return ServiceForward(
            service=instance.service.name,
            url=instance.endpoint.url(entry.mcp_path if mcp else ""),
            bearer=self._bearers[instance.service.name],
            mcp_server=f"service.{instance.service.name}" if mcp else None,
            handoff=handoff,
            port=instance.endpoint.port,
            mcp_path=entry.mcp_path,
        )

    def _handoff_dir(self, name: str) -> Path:
        return self.dir / name / "handoff"

    def _home(self, service: ResolvedService) -> tuple[Path, Path]:
        """The service's own directory (where its tool runs) and its handoff directory, both 0700."""
        home = self.dir / service.name
        handoff = self._handoff_dir(service.name)
        handoff.mkdir(parents=True, exist_ok=True)
        os.chmod(home, 0o700)
        os.chmod(handoff, 0o700)
        return home, handoff

    def _tool_env(self, service: ResolvedService, **extra: str) -> dict[str, str]:
        """What the tool's process gets: enough to run, its own secrets, the run id and `extra`."""
        env = {key: self._env[key] for key in _BASE_ENV if key in self._env}
        env.update({s.name: self._env[s.name] for s in service.declaration.secrets if s.name in self._env})
        env.update({RUN_ID_ENV: self.run_id, **extra})
        return env

    def _run_reclaim(self, service: ResolvedService, args: tuple[str, ...]) -> None:
        entry = service.entry
        assert entry is not None
        problem = digest_problem(entry)
        if problem is not None:
            self._emit(wire.ServiceReclaim(service=service.name, note=f"refused: {problem}"))
            return
        home, handoff = self._home(service)
        done = process.run(
            [str(entry.executable), *args],
            cwd=home,
            env=self._tool_env(service, **{HANDOFF_ENV: str(handoff)}),
            timeout=RECLAIM_TIMEOUT,
            grace=self.resolution.bounds.grace_seconds,
        )
        self._emit(
            wire.ServiceReclaim(
                service=service.name,
                status=None if done.spawn_error else done.exit_code,
                note="" if done.ok else done.describe_failure(),
            )
        )

    def _start(self, service: ResolvedService, task: str) -> _Instance:
        entry = service.entry
        assert entry is not None
        count = self._starts.get(service.name, 0)
        if count - self._suspended.get(service.name, 0) > self.resolution.bounds.restarts:
            raise ServiceUnavailable(
                f"service {service.name} exited and reached its restart bound "
                f"({self.resolution.bounds.restarts}); not restarted again in this run"
            )
        problem = digest_problem(entry)  # checked again right before every start
        if problem is not None:
            raise ServiceUnavailable(f"service {service.name} refused: {problem}")
        self._starts[service.name] = count + 1
        home, handoff = self._home(service)
        try:
            port = free_loopback_port()
        except OSError as exc:
            raise ServiceUnavailable(f"service {service.name} got no loopback port: {exc}") from None
        stdio = entry.transport is Transport.MCP_STDIO
        env = self._tool_env(service, **{PORT_ENV: str(port), HANDOFF_ENV: str(handoff)})
        try:
            child = process.spawn(
                [str(entry.executable), *service.declaration.args],
                cwd=home,
                env=env,
                output=home / "output.log",
                stdio=stdio,
            )
        except OSError as exc:
            raise ServiceUnavailable(f"service {service.name} could not start: {exc}") from None
        bearer = self._bearers.setdefault(service.name, mint_bearer())
        tool = ServedTool(
            service=service.name,
            port=port,
            mcp_path=entry.mcp_path,
            bearer=bearer,
            stdin=child.proc.stdin if stdio else None,
            stdout=child.proc.stdout if stdio else None,
        )
        try:
            endpoint = self._transports[entry.transport.value].serve(tool)
        except OSError as exc:
            child.stop(0)
            raise ServiceUnavailable(f"service {service.name} could not be served: {exc}") from None
        instance = _Instance(service, child, endpoint)
        self._instances[service.name] = instance
        self._emit(
            wire.ServiceStart(
                service=service.name,
                port=endpoint.port,
                task=task,
                attempt=count + 1,
                resolution=self.resolution.digest(),
            )
        )
        return instance

    def _await_ready(self, instance: _Instance) -> None:
        started = time.monotonic()
        deadline = started + self.resolution.bounds.readiness_seconds
        while time.monotonic() < deadline:
            if instance.child.poll() is not None:
                self._reap(instance, note="exited before it was ready")
                raise ServiceUnavailable(f"service {instance.service.name} exited before it was ready")
            remaining = max(0.5, deadline - time.monotonic())
            if instance.endpoint.ready(min(remaining, 5.0)):
                instance.ready = True
                self._emit(
                    wire.ServiceReady(
                        service=instance.service.name, secs=round(time.monotonic() - started, 3)
                    )
                )
                return
            time.sleep(PROBE_INTERVAL)
        self._stop(instance, note="not ready within the readiness bound")
        raise ServiceUnavailable(
            f"service {instance.service.name} was not ready within "
            f"{self.resolution.bounds.readiness_seconds:g}s"
        )

    def _reap(self, instance: _Instance, note: str) -> None:
        status, _killed = instance.child.stop(0)
        instance.endpoint.close()
        self._instances.pop(instance.service.name, None)
        self._emit(wire.ServiceExit(service=instance.service.name, status=status, how="exited", note=note))

    def _stop(self, instance: _Instance, note: str = "") -> None:
        status, killed = instance.child.stop(self.resolution.bounds.grace_seconds)
        instance.endpoint.close()
        self._instances.pop(instance.service.name, None)
        self._emit(
            wire.ServiceExit(
                service=instance.service.name, status=status, how="killed" if killed else "stopped", note=note
            )
        )
