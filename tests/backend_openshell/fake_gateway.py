"""A test OpenShell gateway: the SDK's own gRPC service definition, served on 127.0.0.1.

It implements the calls the openshell backend makes (Health, CreateSandbox, GetSandbox,
ListSandboxes, DeleteSandbox, ExecSandbox, ExposeService) from the proto the `openshell` SDK
ships, so the backend talks to it through the real SDK client and real gRPC. Every call is
recorded. A "sandbox" is a directory under the gateway's root in which commands really run
as local subprocesses: the sandbox's absolute paths (/sandbox/...) are mapped onto that
directory, provider credentials the gateway holds are injected into the command's
environment for the providers a sandbox names (as a real gateway does), and stdout/stderr
stream back as the process writes them.

`fail` makes it break the way a real transport can: "unavailable" (every call answers
UNAVAILABLE), "never_ready" (the sandbox reports an error phase), "cut_stream" (the agent's
command stream is aborted after its first output), "refuse_create".

An exposed service is a real HTTP relay on 127.0.0.1 that passes requests (and their
Authorization header, BEARER_PASSTHROUGH) to the target port.
"""

from __future__ import annotations

import http.client
import queue
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import grpc
from openshell._proto import datamodel_pb2, openshell_pb2, openshell_pb2_grpc

SANDBOX_ROOT = "/sandbox"


@attrs.define
class FakeSandbox:
    name: str
    directory: Path
    request: Any  # the CreateSandboxRequest
    labels: dict[str, str]
    id: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    processes: list[subprocess.Popen[bytes]] = attrs.field(factory=list)

    def message(self, phase: int) -> openshell_pb2.Sandbox:
        return openshell_pb2.Sandbox(
            metadata=datamodel_pb2.ObjectMeta(
                id=self.id, name=self.name, labels=self.labels, workspace="default"
            ),
            spec=self.request.spec,
            status=openshell_pb2.SandboxStatus(phase=phase),
        )


class _Relay(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        super().__init__(("127.0.0.1", 0), _RelayHandler)


class _RelayHandler(BaseHTTPRequestHandler):
    server: _Relay
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _relay(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.target_port, timeout=30)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
        finally:
            upstream.close()
        self.send_response(reply.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _relay


class FakeGateway(openshell_pb2_grpc.OpenShellServicer):
    def __init__(
        self,
        root: Path,
        *,
        path: str = "/usr/local/bin:/usr/bin:/bin",
        providers: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.root = root
        self.path = path  # PATH inside every sandbox, as if baked into the image
        self.providers = {k: dict(v) for k, v in (providers or {}).items()}
        self.calls: list[tuple[str, Any]] = []
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.deleted: list[str] = []
        self.fail: str | None = None
        self._lock = threading.Lock()
        self._relays: list[_Relay] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        openshell_pb2_grpc.add_OpenShellServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeGateway:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._server.stop(grace=None).wait(5)
        for relay in self._relays:
            relay.shutdown()
            relay.server_close()
        for sandbox in list(self.sandboxes.values()):
            self._kill(sandbox)

    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]

    def requests(self, method: str) -> list[Any]:
        return [request for name, request in self.calls if name == method]

    def _record(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        with self._lock:
            copy = type(request)()
            copy.CopyFrom(request)
            self.calls.append((method, copy))
        if self.fail == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "the gateway is down (fake)")

    # -- sandbox paths --------------------------------------------------------------------------

    def host_path(self, sandbox: FakeSandbox, text: str) -> str:
        """Map a sandbox path (or a string holding one) onto the sandbox's directory."""
        return text.replace(SANDBOX_ROOT, str(sandbox.directory))

    def _free_directory(self) -> Path:
        # One stable path while turns run one at a time, as a real sandbox's /sandbox is: the
        # Claude CLI finds a resumed conversation by the project path.
        taken = {s.directory for s in self.sandboxes.values()}
        for index in range(100):
            candidate = self.root / ("sandbox" if index == 0 else f"sandbox-{index}")
            if candidate not in taken:
                return candidate
        raise RuntimeError("too many live fake sandboxes")

    # -- the gateway service --------------------------------------------------------------------

    def Health(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("Health", request, context)
        return openshell_pb2.HealthResponse(status=openshell_pb2.SERVICE_STATUS_HEALTHY, version="fake")

    def CreateSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("CreateSandbox", request, context)
        if self.fail == "refuse_create":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "no capacity (fake)")
        with self._lock:
            if request.name in self.sandboxes:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"sandbox {request.name} exists")
            directory = self._free_directory()
            directory.mkdir(parents=True)
            sandbox = FakeSandbox(request.name, directory, request, dict(request.labels))
            self.sandboxes[request.name] = sandbox
        return openshell_pb2.SandboxResponse(
            sandbox=sandbox.message(openshell_pb2.SANDBOX_PHASE_PROVISIONING)
        )

    def _get(self, name: str, context: grpc.ServicerContext) -> FakeSandbox:
        sandbox = self.sandboxes.get(name)
        if sandbox is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no sandbox {name}")
        return sandbox

    def GetSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("GetSandbox", request, context)
        sandbox = self._get(request.name, context)
        phase = (
            openshell_pb2.SANDBOX_PHASE_ERROR
            if self.fail == "never_ready"
            else openshell_pb2.SANDBOX_PHASE_READY
        )
        return openshell_pb2.SandboxResponse(sandbox=sandbox.message(phase))

    def ListSandboxes(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("ListSandboxes", request, context)
        wanted = dict(part.split("=", 1) for part in request.label_selector.split(",") if "=" in part)
        found = [
            s.message(openshell_pb2.SANDBOX_PHASE_READY)
            for s in self.sandboxes.values()
            if all(s.labels.get(k) == v for k, v in wanted.items())
        ]
        return openshell_pb2.ListSandboxesResponse(sandboxes=found)

    def DeleteSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("DeleteSandbox", request, context)
        with self._lock:
            sandbox = self.sandboxes.pop(request.name, None)
        if sandbox is None:
            if not request.allow_missing:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no sandbox {request.name}")
            return openshell_pb2.DeleteSandboxResponse(outcome=openshell_pb2.DELETION_OUTCOME_ALREADY_ABSENT)
        self._kill(sandbox)
        self.deleted.append(request.name)
        return openshell_pb2.DeleteSandboxResponse(
            outcome=openshell_pb2.DELETION_OUTCOME_COMPLETED, sandbox_id=sandbox.id
        )

    def _kill(self, sandbox: FakeSandbox) -> None:
        for proc in sandbox.processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(sandbox.directory, ignore_errors=True)

    def ExposeService(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("ExposeService", request, context)
        self._get(request.sandbox, context)
        relay = _Relay(request.target_port)
        threading.Thread(target=relay.serve_forever, daemon=True).start()
        self._relays.append(relay)
        endpoint = openshell_pb2.ServiceEndpoint(
            name=request.name,
            sandbox=request.sandbox,
            target_port=request.target_port,
            authorization_mode=request.authorization_mode,
        )
        return openshell_pb2.ServiceEndpointResponse(
            endpoint=endpoint, url=f"http://127.0.0.1:{relay.server_address[1]}"
        )

    def ExecSandbox(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._record("ExecSandbox", request, context)
        sandbox = self._get(request.sandbox, context)
        env = {"PATH": self.path, "HOME": str(sandbox.directory)}
        for provider in sandbox.request.spec.providers:
            env.update(self.providers.get(provider, {}))
        env.update({k: self.host_path(sandbox, v) for k, v in request.environment.items()})
        argv = [self.host_path(sandbox, arg) for arg in request.command]
        cwd = self.host_path(sandbox, request.workdir) if request.workdir else str(sandbox.directory)
        agent = argv[0] not in ("sh", "tar")
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            yield openshell_pb2.ExecSandboxEvent(
                stderr=openshell_pb2.ExecSandboxStderr(data=str(exc).encode())
            )
            yield openshell_pb2.ExecSandboxEvent(exit=openshell_pb2.ExecSandboxExit(exit_code=127))
            return
        sandbox.processes.append(proc)
        chunks: queue.Queue[tuple[str, bytes]] = queue.Queue()

        def pump(kind: str, stream: Any) -> None:
            for chunk in iter(lambda: stream.read1(65536), b""):
                chunks.put((kind, chunk))
            chunks.put((kind, b""))

        def feed() -> None:
            try:
                proc.stdin.write(bytes(request.stdin))  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass

        for target, args in ((pump, ("stdout", proc.stdout)), (pump, ("stderr", proc.stderr)), (feed, ())):
            threading.Thread(target=target, args=args, daemon=True).start()
        limit = request.execution_timeout.seconds or None
        timer = threading.Timer(limit, proc.kill) if limit else None
        if timer:
            timer.start()
        open_streams = 2
        try:
            while open_streams:
                kind, data = chunks.get()
                if not data:
                    open_streams -= 1
                    continue
                if kind == "stdout":
                    yield openshell_pb2.ExecSandboxEvent(stdout=openshell_pb2.ExecSandboxStdout(data=data))
                    if agent and self.fail == "cut_stream":
                        proc.kill()
                        context.abort(grpc.StatusCode.UNAVAILABLE, "connection to the sandbox lost (fake)")
                else:
                    yield openshell_pb2.ExecSandboxEvent(stderr=openshell_pb2.ExecSandboxStderr(data=data))
            code = proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        yield openshell_pb2.ExecSandboxEvent(
            exit=openshell_pb2.ExecSandboxExit(exit_code=124 if code < 0 else code)
        )
