"""The catalog tool: one disposable Oubliette cluster for one run, served to its tasks as a small MCP server.

Started by the engine with CRUCIBLE_RUN_ID, CRUCIBLE_SERVICE_PORT and CRUCIBLE_SERVICE_HANDOFF_DIR
(and OUBLIETTE_MCP_ENDPOINT / OUBLIETTE_MCP_TOKEN in its own environment only), it:

1. deletes any cluster named for this run id (a killed predecessor's),
2. creates a cluster named for this run id and waits until Oubliette reports it Ready,
3. writes the kubeconfig 0600 into the 0700 handoff directory,
4. serves MCP on 127.0.0.1:$CRUCIBLE_SERVICE_PORT/mcp (so the engine's readiness handshake
   succeeds only once the cluster is usable) and renews the lease while it runs; the port is
   bound (not listened on) at the start, so nothing else on the machine takes it meanwhile,
5. on SIGTERM (or SIGINT) deletes the cluster and exits.

Oubliette's views carry no labels, so the run id is carried in the cluster's name:
`crucible-<run id>-<suffix>`, which is what "labelled with the run id" means here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from crucible_service_oubliette import KUBECONFIG_NAME
from crucible_service_oubliette.oubliette import ENDPOINT_ENV, TOKEN_ENV, Oubliette, OublietteError

TTL_ENV = "OUBLIETTE_TTL_SECONDS"
RENEW_ENV = "OUBLIETTE_RENEW_SECONDS"
READY_TIMEOUT_ENV = "OUBLIETTE_READY_TIMEOUT_SECONDS"
TIER_ENV = "OUBLIETTE_TIER"


class ToolError(Exception):
    """The tool cannot do its job (missing settings, Oubliette refusing): it exits non-zero."""


@attrs.frozen
class Settings:
    run_id: str
    port: int
    handoff_dir: Path
    endpoint: str
    token: str
    ttl_seconds: int = 1800
    renew_seconds: float = 600.0
    ready_timeout: float = 600.0
    tier: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str], argv: list[str] | None = None) -> Settings:
        """Settings from the engine's environment; the endpoint and lease may also come as arguments."""
        parser = argparse.ArgumentParser(
            prog="crucible-service-oubliette", description="one Oubliette cluster per run"
        )
        parser.add_argument("--endpoint", default=env.get(ENDPOINT_ENV, ""))
        parser.add_argument("--tier", default=env.get(TIER_ENV, ""))
        parser.add_argument("--ttl-seconds", type=int, default=int(env.get(TTL_ENV, "1800")))
        parser.add_argument("--renew-seconds", type=float, default=float(env.get(RENEW_ENV, "0") or 0))
        parser.add_argument("--ready-timeout", type=float, default=float(env.get(READY_TIMEOUT_ENV, "600")))
        args = parser.parse_args(argv)
        needed = {
            "CRUCIBLE_RUN_ID": env.get("CRUCIBLE_RUN_ID"),
            "CRUCIBLE_SERVICE_PORT": env.get("CRUCIBLE_SERVICE_PORT"),
            "CRUCIBLE_SERVICE_HANDOFF_DIR": env.get("CRUCIBLE_SERVICE_HANDOFF_DIR"),
            f"{ENDPOINT_ENV} (or --endpoint)": args.endpoint,
            TOKEN_ENV: env.get(TOKEN_ENV),
        }
        missing = [key for key, value in needed.items() if not value]
        if missing:
            raise ToolError(f"missing: {', '.join(missing)}")
        return cls(
            run_id=env["CRUCIBLE_RUN_ID"],
            port=int(env["CRUCIBLE_SERVICE_PORT"]),
            handoff_dir=Path(env["CRUCIBLE_SERVICE_HANDOFF_DIR"]),
            endpoint=args.endpoint,
            token=env[TOKEN_ENV],
            ttl_seconds=args.ttl_seconds,
            renew_seconds=args.renew_seconds or max(10.0, args.ttl_seconds / 3),
            ready_timeout=args.ready_timeout,
            tier=args.tier,
        )


def cluster_prefix(run_id: str) -> str:
    """The name prefix that marks a cluster as this run's (a DNS label, room left for a suffix)."""
    cleaned = re.sub(r"[^a-z0-9]", "", run_id.lower())[:40] or "run"
    return f"crucible-{cleaned}-"


def kubeconfig_text(view: dict[str, Any]) -> str:
    """A kubeconfig for the virtual cluster's API; Oubliette's consumer connector supplies the transport."""
    name = view["name"]
    endpoint = str(view.get("virtualEndpointId") or name)
    server = endpoint if endpoint.startswith("https://") else f"https://{endpoint}"
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {name}\n  cluster:\n    server: {server}\n"
        f"contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
        f"current-context: {name}\n"
        f"users:\n- name: {name}\n  user: {{}}\n"
    )


def write_private(directory: Path, name: str, text: str) -> Path:
    """Write `text` as a 0600 file in `directory` (made 0700), atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    target = directory / name
    temp = directory / f".{name}.{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temp, target)
    return target


class ClusterTool:
    def __init__(self, settings: Settings, oubliette: Oubliette | None = None) -> None:
        self.settings = settings
        self.oubliette = oubliette or Oubliette(settings.endpoint, settings.token)
        self.cluster: str | None = None
        self.view: dict[str, Any] = {}
        self.stopping = asyncio.Event()

    async def reclaim_predecessors(self) -> list[str]:
        prefix = cluster_prefix(self.settings.run_id)
        found = [
            item["name"]
            for item in await self.oubliette.list()
            if str(item.get("name", "")).startswith(prefix)
        ]
        for name in found:
            with contextlib.suppress(OublietteError):  # already going: fine
                await self.oubliette.delete(name)
        return found

    async def provision(self) -> None:
        name = cluster_prefix(self.settings.run_id) + secrets.token_hex(3)
        self.cluster = name  # known before create returns: a stop during create still deletes it
        self.view = await self.oubliette.create(name, self.settings.ttl_seconds, self.settings.tier)
        deadline = asyncio.get_running_loop().time() + self.settings.ready_timeout
        delay = 0.2
        while self.view.get("phase") != "Ready":
            if self.view.get("phase") in ("Deleting", "Forgotten", "Expiring"):
                raise ToolError(f"cluster {name} became {self.view.get('phase')} before it was ready")
            if asyncio.get_running_loop().time() > deadline:
                raise ToolError(f"cluster {name} was not Ready within {self.settings.ready_timeout:g}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)
            if self.stopping.is_set():
                return
            delay = min(delay * 2, 5.0)
            self.view = await self.oubliette.get(name)
        write_private(self.settings.handoff_dir, KUBECONFIG_NAME, kubeconfig_text(self.view))

    async def renew_forever(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.settings.renew_seconds)
            if self.stopping.is_set() or self.cluster is None:
                return
            with contextlib.suppress(OublietteError):  # a missed renewal is retried next period
                self.view = await self.oubliette.renew(self.cluster, self.settings.ttl_seconds)

    async def teardown(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.settings.handoff_dir / KUBECONFIG_NAME).unlink()
        if self.cluster is not None:
            with contextlib.suppress(OublietteError):
                await self.oubliette.delete(self.cluster)


def build_app(tool: ClusterTool) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("crucible-service-oubliette", version="0.1.0")

    @server.tool(name="cluster_status", description="The run's virtual cluster: name, phase and lease expiry")
    def cluster_status() -> dict[str, Any]:
        view = tool.view
        return {key: view.get(key) for key in ("name", "phase", "expiresAt", "tier")}

    return server.streamable_http_app(streamable_http_path="/mcp", json_response=True, stateless_http=True)


def bind_port(port: int) -> socket.socket:
    """The engine's port, bound at once and listened on only when serving starts.

    Bound, it is this process's for as long as provisioning takes (minutes, for a real cluster),
    while the engine's readiness probe is refused at once rather than left waiting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the engine left it in TIME_WAIT
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def _no_signal_capture() -> Iterator[None]:
    yield  # our own handlers decide what a signal means: delete the cluster first


async def run(settings: Settings) -> int:
    import uvicorn

    for noisy in ("httpx", "httpx2", "mcp"):  # one line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    tool = ClusterTool(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, tool.stopping.set)
    try:
        bound = bind_port(settings.port)
    except OSError as exc:
        print(f"crucible-service-oubliette: cannot bind 127.0.0.1:{settings.port}: {exc}", file=sys.stderr)
        return 1
    try:
        reclaimed = await tool.reclaim_predecessors()
        if reclaimed:
            print(f"deleted clusters left by an earlier instance: {', '.join(reclaimed)}", flush=True)
        await tool.provision()
        if tool.stopping.is_set():
            return 0
        print(f"cluster {tool.cluster} ready; kubeconfig in {settings.handoff_dir}", flush=True)
        config = uvicorn.Config(
            build_app(tool), host="127.0.0.1", port=settings.port, log_level="warning", lifespan="on"
        )
        web = uvicorn.Server(config)
        # uvicorn offers no setting to leave signal handling to us; replacing its method is the
        # only way, and mypy refuses assigning to a method without this.
        web.capture_signals = _no_signal_capture  # type: ignore[method-assign]
        serving = asyncio.create_task(web.serve(sockets=[bound]))  # listens only now
        renewing = asyncio.create_task(tool.renew_forever())
        stopped = asyncio.create_task(tool.stopping.wait())
        await asyncio.wait({serving, stopped}, return_when=asyncio.FIRST_COMPLETED)
        tool.stopping.set()
        web.should_exit = True
        await asyncio.gather(serving, renewing, return_exceptions=True)
        return 0
    except (OublietteError, ToolError) as exc:
        print(f"crucible-service-oubliette: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        bound.close()
        await tool.teardown()


def main() -> None:
    try:
        settings = Settings.from_env(dict(os.environ), sys.argv[1:])
    except (ToolError, ValueError) as exc:
        print(f"crucible-service-oubliette: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(asyncio.run(run(settings)))


if __name__ == "__main__":
    main()
