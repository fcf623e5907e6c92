"""The flow package's one seam onto the session log: every line becomes a contract-shaped event.

Lines are decoded by crucible_core.contract.wire (crucible's session wire: rows nested under ``row``,
agent events nested under ``event``, ``budget`` with ``spent``/``elapsed_secs``, ``note`` with
``msg``) and handed to the fold as plain dicts of the wire's fields. Logs our engine wrote
before it spoke the wire carried flat rows (``verdict``, ``snapshot``) and ``agent_*`` events;
the wire does not decode those, so they are mapped onto the same shapes here. Nothing else in
the package looks at raw lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from crucible_core.contract import wire
from crucible_core.contract.run_kind import RunKind, run_kind

Event = dict[str, Any]

# Our older agent event kinds, as the contract's nested agent event kinds.
_LEGACY_AGENT_KINDS = {
    "agent_text": "text",
    "agent_thinking": "thinking",
    "agent_tool_call": "tool",
    "agent_tool_result": "tool_result",
    "agent_usage": "tokens",
    "agent_retry": "retry",
    "agent_result": "result",
}


def read_session(path: Path) -> list[Event]:
    """Every decodable event of a session log, in order; blank, torn and foreign lines are skipped."""
    with open(path, "rb") as handle:
        return list(decode_lines(handle))


def read_kind(path: Path) -> RunKind:
    """The kind of run that wrote the log at `path`, reading no further than it takes to tell."""
    started, gate, admitted = False, None, False
    with open(path, "rb") as handle:
        for raw in handle:
            value = wire.parse_object(raw)
            kind = value.get("kind") if value is not None else None
            if kind == "start" and value is not None and not started:
                started, gate = True, str(value.get("gate") or "")
                if run_kind(started=True, gate=gate, plan_admitted=True) is RunKind.LOOP:
                    break  # a scored loop's label: nothing later in the log changes the answer
            elif kind == "plan_admitted":
                admitted = True
                break
    return run_kind(started=started, gate=gate, plan_admitted=admitted)


def decode_lines(lines: Iterable[bytes | str]) -> Iterator[Event]:
    for raw in lines:
        value = wire.parse_object(raw)  # None for a torn tail from a killed writer
        if value is not None:
            yield from decode_event(value)


def decode_event(raw: Mapping[str, Any]) -> Iterator[Event]:
    """One raw log object as zero or more contract-shaped events."""
    line = wire.from_object(dict(raw))
    if line is not None and not isinstance(line.event, wire.Unknown):
        yield {"kind": line.event.KIND, **wire.to_fields(line.event)}
        return
    yield from _decode_legacy(raw)


def _decode_legacy(raw: Mapping[str, Any]) -> Iterator[Event]:
    """Our pre-wire shapes (and anything the wire does not know), mapped by hand."""
    kind = raw["kind"]
    if kind == "row":
        if isinstance(raw.get("row"), Mapping):
            yield {"kind": "row", "row": dict(raw["row"]), "solved": bool(raw.get("solved"))}
        else:
            yield {"kind": "row", "row": _legacy_row(raw), "solved": bool(raw.get("solved"))}
    elif kind == "agent":
        if isinstance(raw.get("event"), Mapping):
            yield {"kind": "agent", "event": dict(raw["event"])}
    elif kind in _LEGACY_AGENT_KINDS:
        yield {
            "kind": "agent",
            "event": _legacy_agent(_LEGACY_AGENT_KINDS[kind], raw),
            "iter": raw.get("iter"),
        }
    elif kind == "note":
        yield {"kind": "note", "msg": str(raw.get("msg") or raw.get("text") or "")}
    elif kind == "budget":
        elapsed = raw.get("elapsed_secs", raw.get("active_s", 0))
        yield {"kind": "budget", "spent": _num(raw.get("spent")) or 0.0, "elapsed_secs": _num(elapsed) or 0.0}
    elif kind == "turn":
        # our engine's end-of-turn record: the contract brackets a turn with agent_done
        yield {"kind": "agent_done", "iter": raw.get("iter")}
    elif kind == "start":
        event = dict(raw)
        if isinstance(raw.get("budget"), Mapping):
            event.setdefault("iters_total", raw["budget"].get("iterations"))
        yield event
    else:
        yield dict(raw)


def _legacy_row(raw: Mapping[str, Any]) -> dict[str, Any]:
    detail = raw.get("detail")
    if isinstance(detail, Mapping):
        detail = ", ".join(f"{k}={v}" for k, v in detail.items())
    decision = str(raw.get("verdict") or raw.get("decision") or "")
    if decision == "discard" and raw.get("valid") is False:
        decision = "invalid"
    return {
        "iter": int(raw.get("iter") or 0),
        "decision": decision,
        "note": str(raw.get("note") or ""),
        "detail": str(detail or ""),
        "diff": str(raw.get("diff") or ""),
        "diffstat": str(raw.get("diffstat") or ""),
        "score": _num(raw.get("score")),
        "total": raw.get("total"),
        "phase": raw.get("phase"),
        "kept_snap": raw.get("snapshot") or raw.get("sha"),
        "baseline": _num(raw.get("baseline")),
    }


def _legacy_agent(kind: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    if kind in ("text", "thinking"):
        return {"kind": kind, "delta": str(raw.get("text") or "")}
    if kind == "tool":
        return {"kind": "tool", "name": str(raw.get("name") or ""), "summary": _summary(raw.get("input"))}
    if kind == "result":
        return {
            "kind": "result",
            "subtype": str(raw.get("subtype") or ""),
            "is_error": raw.get("ok") is False,
            "turns": int(raw.get("turns") or 0),
            "cost_usd": _num(raw.get("cost_usd")) or 0.0,
            "text": str(raw.get("text") or ""),
        }
    return {"kind": kind, **{k: v for k, v in raw.items() if k not in ("kind", "v", "ts")}}


def _summary(tool_input: Any) -> str:
    """A one-line summary of a tool call's input: its most telling argument."""
    if isinstance(tool_input, Mapping):
        for key in ("command", "file_path", "path", "pattern", "url", "description"):
            if isinstance(tool_input.get(key), str):
                return tool_input[key].splitlines()[0][:160] if tool_input[key] else ""
        return ", ".join(sorted(str(k) for k in tool_input))[:160]
    return ""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
