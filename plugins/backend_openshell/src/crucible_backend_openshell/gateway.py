"""The OpenShell gateway through its Python SDK: sandboxes created, run in, emptied and deleted.

Imported only when a turn (or a run-end sweep) talks to the gateway, because it loads grpc.
Every failure of the gateway itself is raised as a TransportFailure whose `stage` says what
broke (the C-TRANSPORT classes): the gateway could not be reached, the sandbox never became
ready, the workspace could not be moved, or the command's stream was cut.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import grpc
from openshell import SandboxClient, SandboxError
from openshell._proto import datamodel_pb2, openshell_pb2, sandbox_pb2

from crucible_backend_openshell.egress import ResolvedEgress
from crucible_backend_openshell.settings import OpenShellTable

RUN_LABEL = "crucible.run-id"
ITERATION_LABEL = "crucible.iteration"

_ACCESS = {
    "read-only": sandbox_pb2.NETWORK_ACCESS_PRESET_READ_ONLY,
    "read-write": sandbox_pb2.NETWORK_ACCESS_PRESET_READ_WRITE,
    "full": sandbox_pb2.NETWORK_ACCESS_PRESET_FULL,
}
_ENFORCEMENT = {
    "enforce": sandbox_pb2.NETWORK_ENFORCEMENT_MODE_ENFORCE,
    "audit": sandbox_pb2.NETWORK_ENFORCEMENT_MODE_AUDIT,
}
# Codes that mean the gateway (not the request) is the problem.
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN}


class TransportFailure(Exception):
    """The turn could not run, or its result could not come back; says nothing about the candidate."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage  # gateway | sandbox | workspace | stream


class GatewayConfigError(Exception):
    """The manifest's gateway settings cannot work here (a credential variable that is not set)."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else ""
        name = code.name if code is not None else "error"
        return f"{name}: {details or 'no details'}"[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


def policy_message(egress: ResolvedEgress) -> sandbox_pb2.SandboxPolicy:
    """The resolved egress as the gateway's policy: one rule, deny by default beyond it."""
    rule = sandbox_pb2.NetworkPolicyRule(
        name="crucible",
        endpoints=[
            sandbox_pb2.NetworkEndpoint(
                host=e.host,
                port=e.port,
                protocol=e.protocol,
                access=_ACCESS[e.access],
                enforcement=_ENFORCEMENT[e.enforcement],
            )
            for e in egress.endpoints
        ],
        binaries=[sandbox_pb2.NetworkBinary(path=b) for b in egress.binaries],
    )
    return sandbox_pb2.SandboxPolicy(version=1, network_policies={"crucible": rule} if rule.endpoints else {})


def bearer_of(table: OpenShellTable, environ: Mapping[str, str]) -> str | None:
    if not table.credentials.startswith("env:"):
        return None
    name = table.credentials[4:]
    value = environ.get(name)
    if not value:
        raise GatewayConfigError(
            f"[agent.openshell].credentials names {name}, which is not set for the engine"
        )
    return value


class Gateway:
    """One connection to the gateway for one turn (or one sweep); close() releases it."""

    def __init__(self, table: OpenShellTable, environ: Mapping[str, str] | None = None) -> None:
        self.table = table
        self.namespace = table.namespace
        environ = os.environ if environ is None else environ
        timeout = float(table.timeouts.connect)
        try:
            if table.gateway is None or table.credentials == "active-gateway":
                self.client = SandboxClient.from_active_cluster(timeout=timeout)
            else:
                self.client = SandboxClient(
                    table.gateway, bearer_token=bearer_of(table, environ), timeout=timeout
                )
        except SandboxError as exc:
            raise TransportFailure("gateway", f"no usable gateway: {exc}") from exc

    def close(self) -> None:
        self.client.close()

    def check_reachable(self) -> None:
        try:
            self.client.health()
        except grpc.RpcError as exc:
            raise TransportFailure(
                "gateway", f"the OpenShell gateway is unreachable ({_describe(exc)})"
            ) from exc

    def create(
        self,
        name: str,
        *,
        image: str,
        egress: ResolvedEgress,
        providers: Sequence[str],
        labels: Mapping[str, str],
    ) -> None:
        spec = openshell_pb2.SandboxSpec(
            template=openshell_pb2.SandboxTemplate(image=image, labels=dict(labels)),
            policy=policy_message(egress),
            providers=list(providers),
        )
        try:
            self.client.create(workspace=self.namespace, spec=spec, name=name, labels=labels)
        except (grpc.RpcError, SandboxError) as exc:
            code = (
                exc.code()
                if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None))
                else None
            )
            stage = "gateway" if code in _UNREACHABLE else "sandbox"
            raise TransportFailure(
                stage, f"the gateway did not create the sandbox ({_describe(exc)})"
            ) from exc

    def wait_ready(self, name: str) -> None:
        try:
            self.client.wait_ready(
                name, workspace=self.namespace, timeout_seconds=float(self.table.timeouts.ready)
            )
        except (grpc.RpcError, SandboxError) as exc:
            raise TransportFailure("sandbox", f"the sandbox never became ready ({_describe(exc)})") from exc

    def expose(self, sandbox: str, service: str, target_port: int) -> str:
        """Publish an engine-side forward through the gateway; returns the URL the sandbox uses."""
        request = openshell_pb2.ExposeServiceRequest(
            workspace_scope=datamodel_pb2.WorkspaceSelector(workspace=self.namespace),
            name=service,
            target_port=target_port,
            sandbox=sandbox,
            authorization_mode=openshell_pb2.SERVICE_AUTHORIZATION_MODE_BEARER_PASSTHROUGH,
        )
        try:
            # SDK 0.1.5 wraps no ExposeService call; its stub (with the SDK's auth) is the client.
            response = self.client._stub.ExposeService(request, timeout=float(self.table.timeouts.connect))
        except grpc.RpcError as exc:
            raise TransportFailure(
                "gateway", f"the gateway did not expose service {service} ({_describe(exc)})"
            ) from exc
        return str(response.url)

    def stream(
        self,
        sandbox: str,
        argv: Sequence[str],
        *,
        workdir: str = "",
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
        timeout: float | None = None,
    ) -> Iterator[tuple[str, bytes]]:
        """Run a command in the sandbox; yields ("stdout"|"stderr", data) then ("exit", code)."""
        request = openshell_pb2.ExecSandboxRequest(
            workspace_scope=datamodel_pb2.WorkspaceSelector(workspace=self.namespace),
            sandbox=sandbox,
            command=list(argv),
            workdir=workdir,
            environment=dict(env or {}),
            stdin=stdin,
            no_login_shell=True,
        )
        deadline = None
        if timeout is not None:
            request.execution_timeout.seconds = max(1, int(timeout + 0.999))
            deadline = timeout + 10.0  # the gateway's own kill lands first
        call = self.client._stub.ExecSandbox(request, timeout=deadline)
        exited = False
        try:
            for event in call:
                kind = event.WhichOneof("payload")
                if kind == "stdout":
                    yield "stdout", bytes(event.stdout.data)
                elif kind == "stderr":
                    yield "stderr", bytes(event.stderr.data)
                elif kind == "exit":
                    exited = True
                    yield "exit", str(int(event.exit.exit_code)).encode()
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                yield "deadline", b""
                return
            raise TransportFailure("stream", f"the sandbox's stream was cut ({_describe(exc)})") from exc
        finally:
            call.cancel()
        if not exited:
            raise TransportFailure("stream", "the sandbox's stream ended without the command's exit status")

    def run(self, sandbox: str, argv: Sequence[str], *, stdin: bytes = b"", stage: str, limit: int) -> bytes:
        """A helper command (tar, mkdir) that must succeed; returns its stdout, bounded by `limit`."""
        out = bytearray()
        errors = bytearray()
        code = None
        for kind, data in self.stream(
            sandbox, argv, stdin=stdin, timeout=float(self.table.timeouts.transfer)
        ):
            if kind == "stdout":
                out += data
                if len(out) > limit:
                    raise TransportFailure(
                        stage, f"{argv[0]} in the sandbox returned more than {limit} bytes"
                    )
            elif kind == "stderr":
                errors += data[-2000:]
            elif kind == "exit":
                code = int(data)
            elif kind == "deadline":
                raise TransportFailure(stage, f"{argv[0]} in the sandbox outlived timeouts.transfer")
        if code != 0:
            tail = errors.decode("utf-8", "replace").strip()[-300:]
            raise TransportFailure(stage, f"{' '.join(argv[:3])} in the sandbox exited {code}: {tail}")
        return bytes(out)

    def delete(self, name: str) -> None:
        self.client.delete(name, workspace=self.namespace, allow_missing=True)

    def sweep(self, run_id: str) -> list[str]:
        """Delete every sandbox labelled with this run id (a killed predecessor's included)."""
        names = [
            ref.name
            for ref in self.client.list_all(workspace=self.namespace, label_selector=f"{RUN_LABEL}={run_id}")
        ]
        for name in names:
            self.delete(name)
        return names


def with_retries(action: Callable[[], None], attempts: int = 3, pause: float = 0.2) -> None:
    """Deleting must survive a blip: a sandbox left behind holds resources until someone notices."""
    for attempt in range(attempts):
        try:
            action()
            return
        except grpc.RpcError:
            if attempt == attempts - 1:
                raise
            time.sleep(pause * (attempt + 1))
