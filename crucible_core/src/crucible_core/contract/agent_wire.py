"""Translating a harness's agent events (the plugin vocabulary, `agent_text`...) into wire agent events.

Harnesses keep their own small vocabulary (`crucible_core.protocols.Turn.emit`); the session log
speaks the contract's: `agent_session` at top level, everything else nested as
`{"kind":"agent","event":{...}}` with the contract's agent kinds (text, thinking, tool, tokens,
retry, result, init). Fields the contract has no slot for ride along as our optional additions;
a kind with no counterpart becomes an agent `log` line, so nothing a harness reports is lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crucible_core.contract import wire


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _agent(event: wire.AgentEvent) -> wire.Agent:
    return wire.Agent(event=event)


def to_wire(kind: str, fields: Mapping[str, Any]) -> wire.Event:
    f = fields
    if kind == "agent_session":
        action = wire.SessionAction.RESUMED if f.get("action") == "resumed" else wire.SessionAction.STARTED
        return wire.AgentSession(session=_str(f.get("session")), action=action, turn=_int(f.get("turn")))
    if kind == "agent_text":
        truncated = f.get("truncated")
        return _agent(
            wire.AgentText(
                delta=_str(f.get("text")),
                truncated=dict(truncated) if isinstance(truncated, Mapping) else None,
            )
        )
    if kind == "note":  # the engine's own remark inside a turn (the output cap's summary)
        return wire.Note(msg=_str(f.get("text")), level=_str(f.get("level")) or None)
    if kind == "agent_thinking":
        return _agent(wire.AgentThinking(delta=_str(f.get("text"))))
    if kind == "agent_tool_call":
        name = _str(f.get("name"))
        return _agent(
            wire.AgentTool(name=name, summary=name, input=f.get("input"), id=_str(f.get("id")) or None)
        )
    if kind == "agent_tool_result":
        is_error = bool(f.get("is_error"))
        return _agent(
            wire.AgentTool(
                summary="error" if is_error else "result",
                result=_str(f.get("content")),
                id=_str(f.get("id")) or None,
                is_error=is_error,
            )
        )
    if kind == "agent_usage":
        inp, out = _int(f.get("input_tokens")), _int(f.get("output_tokens"))
        read, write = _int(f.get("cache_read_input_tokens")), _int(f.get("cache_creation_input_tokens"))
        return _agent(
            wire.AgentTokens(
                input=inp,
                output=out,
                cache_read=read,
                cache_write=write,
                total=inp + out + read + write,
                cost_usd=_float(f.get("cost_usd")),
            )
        )
    if kind == "agent_retry":
        return _agent(
            wire.AgentRetry(
                attempt=_int(f.get("attempt")),
                error=_str(f.get("error_status")),
                delay_ms=_float(f.get("delay_ms")),
            )
        )
    if kind == "agent_result":
        ok = f.get("ok", True) is not False
        return _agent(
            wire.AgentResult(
                subtype=_str(f.get("subtype")),
                is_error=not ok,
                turns=_int(f.get("turns")),
                cost_usd=_float(f.get("cost_usd")) or 0.0,
                error=None if ok else (_str(f.get("error") or f.get("text")) or None),
                duration_ms=_float(f.get("duration_ms")),
                text=_str(f.get("text")) or None,
            )
        )
    if kind == "agent_start":
        tools = f.get("tools")
        return _agent(
            wire.AgentInit(
                model=_str(f.get("model")),
                tools=len(tools) if isinstance(tools, list) else _int(tools),
                harness=_str(f.get("harness")) or None,
                version=_str(f.get("version")) or None,
                permission_mode=_str(f.get("permission_mode")) or None,
            )
        )
    if kind == "sandbox_log":  # a sandboxing backend's replay of its sandbox's own log
        extra = f.get("fields")
        return _agent(
            wire.AgentSandboxLog(
                ts_ms=_int(f.get("ts_ms")),
                level=_str(f.get("level")),
                target=_str(f.get("target")),
                message=_str(f.get("message")),
                denial=f.get("denial") is True,
                fields={str(k): _str(v) for k, v in extra.items()} if isinstance(extra, Mapping) else {},
            )
        )
    rest = {k: v for k, v in f.items()}
    return _agent(
        wire.AgentLog(level="info", label=kind, value=json.dumps(rest, default=str) if rest else None)
    )
