"""The ACP client of one turn, run as a process of its own: `python -m crucible_harness_acp.driver CONFIG`.

The harness starts this driver under crucible's supervisor (own process group, deadline,
bounded capture), so the agent it starts in turn lives and dies with the turn, on the host
and inside a sandbox alike. The driver reads the prompt on stdin, starts the agent with the
turn's environment in its own working directory (the workspace), speaks the Agent Client
Protocol to it over its stdio (through the `agent-client-protocol` SDK): initialize, one
session with the turn's MCP servers, one prompt. What the agent asks of its client is answered
by client.py. Each event is one JSON line on stdout (events.py); the last line is the turn's
end. The agent's own stderr passes through to ours, which the supervisor keeps.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AcpMcpServer,
    ClientCapabilities,
    EnvVariable,
    FileSystemCapabilities,
    HttpHeader,
    HttpMcpServer,
    Implementation,
    McpServerStdio,
    SseMcpServer,
)

from crucible_harness_acp import events
from crucible_harness_acp.client import Out, TurnClient, wire
from crucible_harness_acp.config import TurnConfig
from crucible_harness_acp.policy import Grant

# The longest JSON-RPC line read from the agent: a file's text travels in one.
LINE_LIMIT = 16 << 20
AUTH_REQUIRED = -32000

McpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio


class TurnFailed(Exception):
    """The turn cannot go on; `failure` is the class the harness reports (spawn, provider, agent, stream)."""

    def __init__(self, failure: str, note: str) -> None:
        super().__init__(note)
        self.failure = failure
        self.note = note


def mcp_servers(servers: Mapping[str, Any], capabilities: Any) -> list[McpServer]:
    """The turn's MCP servers (the mcpServers config shape) in ACP's form, for session/new.

    A server the agent cannot take (it advertises no HTTP or SSE transport) fails the turn:
    the run granted tools the agent would otherwise silently lack.
    """
    converted: list[McpServer] = []
    for name, entry in servers.items():
        if not isinstance(entry, Mapping):
            continue
        kind = entry.get("type") or ("stdio" if "command" in entry else "http")
        if kind in ("http", "sse"):
            if not getattr(capabilities, kind, False):
                raise TurnFailed(
                    "spawn",
                    f"the agent does not accept {kind.upper()} MCP servers, so it cannot reach {name!r} "
                    "(the broker and run services are served over HTTP): use an agent that does",
                )
            headers = [HttpHeader(name=k, value=str(v)) for k, v in dict(entry.get("headers") or {}).items()]
            url = str(entry["url"])
            if kind == "http":
                converted.append(HttpMcpServer(type="http", name=name, url=url, headers=headers))
            else:
                converted.append(SseMcpServer(type="sse", name=name, url=url, headers=headers))
        else:
            env = [EnvVariable(name=k, value=str(v)) for k, v in dict(entry.get("env") or {}).items()]
            args = [str(a) for a in entry.get("args") or []]
            converted.append(McpServerStdio(name=name, command=str(entry["command"]), args=args, env=env))
    return converted


def _request_error_text(exc: RequestError) -> str:
    data = exc.data
    detail = data.get("details") if isinstance(data, Mapping) else data
    text = str(exc) if detail in (None, "") else f"{exc}: {detail}"
    return events.clip(text, 500)


def _prompt_failure(exc: RequestError) -> TurnFailed:
    """An error the agent answered session/prompt with: the provider's, or the agent's own."""
    text = _request_error_text(exc)
    if exc.code == AUTH_REQUIRED:
        return TurnFailed("provider", f"the agent needs authentication it does not have: {text}")
    # Agents relay the model provider's failure as the error's text ("API Error: 529 ...").
    if "api error" in text.lower() or "overloaded" in text.lower():
        return TurnFailed("provider", f"the model provider failed: {text}")
    return TurnFailed("agent", f"the agent ended the turn with an error: {text}")


def _option(session: Any, category: str) -> Any:
    """The session's config option of a category (model, thought_level), or None when it has none."""
    for option in getattr(session, "config_options", None) or []:
        if category in (getattr(option, "category", None), getattr(option, "id", None)):
            return option
    return None


async def _choose(conn: Any, session: Any, category: str, value: str, what: str, out: Out) -> None:
    """Select a session config option (the model, the thought level) when the agent offers one."""
    option = _option(session, category)
    if option is None:
        out.event(events.AGENT_NOTE, {"text": f"the agent offers no {what} choice: {value!r} is not applied"})
        return
    try:
        await conn.set_config_option(config_id=option.id, session_id=session.session_id, value=value)
    except RequestError as exc:
        raise TurnFailed("spawn", f"the agent refused {what} {value!r}: {_request_error_text(exc)}") from None


async def drive(config: TurnConfig, prompt: str, out: Out) -> dict[str, Any]:
    """Run the turn; return the end record (stop reason, usage, cost)."""
    workspace = Path.cwd().resolve()  # requests are answered inside it only
    grant = Grant(frozenset(config.allow), tuple(config.mcp_servers))
    client = TurnClient(workspace, grant, out)
    started = time.monotonic()
    begun = False  # the session exists: a broken connection from here on is a stream failure
    try:
        async with spawn_agent_process(
            client,
            config.command[0],
            *config.command[1:],
            env=dict(os.environ),
            cwd=workspace,
            transport_kwargs={"stderr": None, "limit": LINE_LIMIT},
        ) as (conn, _process):
            try:
                init = await conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
                    ),
                    client_info=Implementation(name="crucible", version="0.1.0"),
                )
                capabilities = getattr(init.agent_capabilities, "mcp_capabilities", None)
                servers = mcp_servers(config.mcp_servers, capabilities)
                session = await conn.new_session(cwd=str(workspace), mcp_servers=servers)
            except RequestError as exc:
                if exc.code == AUTH_REQUIRED:
                    note = f"the agent needs authentication: {_request_error_text(exc)}"
                    raise TurnFailed("provider", note) from None
                note = f"the agent refused to start a session: {_request_error_text(exc)}"
                raise TurnFailed("spawn", note) from None
            begun = True
            if config.model:
                await _choose(conn, session, "model", config.model, "model", out)
            if config.effort:
                await _choose(conn, session, "thought_level", config.effort, "reasoning effort", out)
            info = init.agent_info
            current_model = getattr(_option(session, "model"), "current_value", None)
            out.event(
                events.AGENT_START,
                {
                    "harness": "acp",
                    "agent": info.name if info else None,
                    "version": info.version if info else None,
                    "model": config.model or current_model,
                    "permission_mode": grant.describe(),
                    "mcp_servers": sorted(config.mcp_servers),
                },
            )
            try:
                response = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
            except RequestError as exc:
                raise _prompt_failure(exc) from None
            finally:
                client.decoder.finish()
                await client.terminals.close()
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        client.decoder.finish()
        if not begun:
            note = f"the agent closed the connection before a session began ({exc}): is it an ACP agent?"
            raise TurnFailed("spawn", note) from None
        raise TurnFailed("stream", f"the connection to the agent broke off: {exc}") from None
    except OSError as exc:  # the agent program could not be started
        note = f"could not start the agent {config.command[0]!r}: {exc.strerror or exc}"
        raise TurnFailed("spawn", note) from None
    usage = wire(response.usage) if response.usage is not None else None
    return {
        "stop_reason": str(response.stop_reason),
        "usage": usage,
        "cost_usd": client.decoder.cost_usd,
        "text": events.clip(client.decoder.last_text, 600),
        "duration_ms": round((time.monotonic() - started) * 1000),
    }


def main(argv: Sequence[str]) -> int:
    out = Out(sys.stdout)
    if len(argv) != 1:
        out.write({events.LINE_END: {"failure": "spawn", "note": "usage: driver CONFIG"}})
        return 2
    try:
        config = TurnConfig.from_json(Path(argv[0]).read_bytes())
        prompt = sys.stdin.read()
        end = asyncio.run(drive(config, prompt, out))
    except TurnFailed as exc:
        out.write({events.LINE_END: {"failure": exc.failure, "note": exc.note}})
        return 1
    except Exception as exc:  # an answer the SDK could not decode, or a fault of ours: still one end line
        note = events.clip(f"the acp driver failed: {exc!r}", 600)
        out.write({events.LINE_END: {"failure": "stream", "note": note}})
        return 1
    out.write({events.LINE_END: end})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
