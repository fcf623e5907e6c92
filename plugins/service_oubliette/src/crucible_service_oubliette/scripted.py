"""A scripted stand-in for an Oubliette MCP endpoint, for tests and the example (no cluster is made).

It speaks Oubliette's real surface — MCP streamable HTTP at /mcp behind a bearer token, tools
oubliette_create/get/list/renew/delete with the public schemas — and keeps an inventory of
"clusters" plus a log of every call in a directory, so a test can see what a client did:

    python -m crucible_service_oubliette.scripted --port 8765 --token secret --state ./oubliette

A caller that binds the listening socket itself (port 0) passes it as `--fd N` instead of `--port`,
so no other process can take the port between choosing it and serving on it.

A cluster reports phase Provisioning for its first `ready_after` gets, then Ready.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hmac
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MIN_TTL, MAX_TTL = 30, 86_400


class Inventory:
    """Clusters and the call log, kept on disk (a test reads them from outside the process)."""

    def __init__(self, state: Path, ready_after: int) -> None:
        self.state = state
        self.ready_after = ready_after
        self.lock = threading.Lock()
        state.mkdir(parents=True, exist_ok=True)
        self.path = state / "inventory.json"
        self.clusters: dict[str, dict[str, Any]] = (
            json.loads(self.path.read_text()) if self.path.exists() else {}
        )

    def log(self, tool: str, arguments: dict[str, Any], outcome: str) -> None:
        line = {"tool": tool, "arguments": arguments, "outcome": outcome, "ts": _now().isoformat()}
        with open(self.state / "calls.jsonl", "a") as handle:
            handle.write(json.dumps(line) + "\n")

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.clusters, indent=1, sort_keys=True))
        os.replace(tmp, self.path)

    def view(self, name: str) -> dict[str, Any]:
        cluster = self.clusters[name]
        return {
            "name": name,
            "tier": cluster["tier"],
            "expiresAt": cluster["expiresAt"],
            "phase": cluster["phase"],
            "virtualEndpointId": f"vc-{name}.oubliette.invalid",
            "metricsReady": False,
        }


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _check(name: str, ttl: int | None = None) -> None:
    if not name or len(name) > 59 or not NAME.fullmatch(name):
        raise ValueError("name must be a DNS label of at most 59 characters")
    if ttl is not None and not MIN_TTL <= ttl <= MAX_TTL:
        raise ValueError(f"ttlSeconds must be between {MIN_TTL} and {MAX_TTL}")


def build_app(inventory: Inventory, token: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("oubliette", version="0.1.0-scripted")

    def recorded(
        tool: str, arguments: dict[str, Any], action: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        with inventory.lock:
            try:
                result = action()
            except (ValueError, KeyError) as exc:
                inventory.log(tool, arguments, f"error: {exc}")
                raise ValueError(str(exc).strip("'")) from None
            inventory.log(tool, arguments, "ok")
            inventory.save()
            return result

    @server.tool(name="oubliette_create", description="Create an expiring Oubliette")
    def create(name: str, ttlSeconds: int, tier: str = "") -> dict[str, Any]:
        def act() -> dict[str, Any]:
            _check(name, ttlSeconds)
            if tier not in ("", "stub"):
                raise ValueError(f"tier {tier!r} is not enabled")
            if name not in inventory.clusters:
                expires = _now() + dt.timedelta(seconds=ttlSeconds)
                inventory.clusters[name] = {
                    "tier": "stub",
                    "expiresAt": expires.isoformat().replace("+00:00", "Z"),
                    "phase": "Provisioning",
                    "gets": 0,
                }
            return inventory.view(name)

        return recorded("oubliette_create", {"name": name, "ttlSeconds": ttlSeconds, "tier": tier}, act)

    @server.tool(name="oubliette_get", description="Get lifecycle state without credentials")
    def get(name: str) -> dict[str, Any]:
        def act() -> dict[str, Any]:
            _check(name)
            cluster = inventory.clusters[name]  # KeyError: not found
            cluster["gets"] += 1
            if cluster["phase"] == "Provisioning" and cluster["gets"] >= inventory.ready_after:
                cluster["phase"] = "Ready"
            return inventory.view(name)

        return recorded("oubliette_get", {"name": name}, act)

    @server.tool(name="oubliette_list", description="List visible Oubliettes")
    def list_() -> dict[str, Any]:
        return recorded(
            "oubliette_list", {}, lambda: {"items": [inventory.view(n) for n in sorted(inventory.clusters)]}
        )

    @server.tool(name="oubliette_renew", description="Move a non-terminal expiry forward within policy")
    def renew(name: str, ttlSeconds: int) -> dict[str, Any]:
        def act() -> dict[str, Any]:
            _check(name, ttlSeconds)
            cluster = inventory.clusters[name]
            cluster["expiresAt"] = (
                (_now() + dt.timedelta(seconds=ttlSeconds)).isoformat().replace("+00:00", "Z")
            )
            return inventory.view(name)

        return recorded("oubliette_renew", {"name": name, "ttlSeconds": ttlSeconds}, act)

    @server.tool(name="oubliette_delete", description="Explicitly delete an Oubliette")
    def delete(name: str) -> dict[str, Any]:
        def act() -> dict[str, Any]:
            _check(name)
            del inventory.clusters[name]
            return {"name": name, "status": "deleting"}

        return recorded("oubliette_delete", {"name": name}, act)

    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, stateless_http=True)
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if not hmac.compare_digest(headers.get(b"authorization", b""), expected):
                inventory.log("(any)", {}, "refused: bad bearer")
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"), (b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized\n"})
                return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int)
    where.add_argument("--fd", type=int, help="serve on this inherited listening socket")
    parser.add_argument("--token", default=os.environ.get("OUBLIETTE_MCP_TOKEN", ""))
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--ready-after", type=int, default=2)
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("a token is required (--token or OUBLIETTE_MCP_TOKEN)")
    for noisy in ("httpx", "httpx2", "mcp"):  # one line per request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    app = build_app(Inventory(args.state, args.ready_after), args.token)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port or 0, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=None if args.fd is None else [socket.socket(fileno=args.fd)])


if __name__ == "__main__":
    main()
