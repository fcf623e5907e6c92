"""The tools every run's broker offers: distress, escalate, request_approval and steer_inbox.

Each writes the same marker its CLI twin writes (`crucible distress`, `crucible escalate`,
PROVISIONING_PENDING.json), so the loop takes it at the same safe point whichever way it came.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crucible_core.api import (
    DISTRESS_SEVERITIES,
    ESCALATION_CATEGORIES,
    PROVISIONING_MARKER,
    BrokerTool,
    CrucibleError,
    ToolCall,
    ToolError,
    add_distress_note,
    make_distress,
    make_escalation,
    raise_distress,
    write_atomic,
    write_escalation_marker,
)


def _distress(call: ToolCall) -> Mapping[str, Any]:
    try:
        page = make_distress(
            call.text("severity"), call.text("reason"), call.texts("evidence"), call.iteration
        )
        if page.severity != "error":
            add_distress_note(call.runtime.distress_dir, page)
            return {"status": "noted", "severity": page.severity}
        if not raise_distress(call.runtime.distress_dir, page):
            return {"status": "already suspending"}
    except CrucibleError as exc:
        raise ToolError(exc.render()) from None
    return {"status": "suspending", "detail": "wrap up your turn; the run waits for a human after it"}


def _escalate(call: ToolCall) -> Mapping[str, Any]:
    try:
        record = make_escalation(call.text("category"), call.text("reason"), call.texts("evidence"))
        write_escalation_marker(call.runtime.workspace, record)
    except CrucibleError as exc:
        raise ToolError(exc.render()) from None
    except OSError as exc:
        raise ToolError(f"could not write the escalation marker: {exc}; the run is NOT escalated") from None
    return {"status": "escalated", "detail": "end your turn; the run stops for a human after it"}


def _request_approval(call: ToolCall) -> Mapping[str, Any]:
    trace_id = call.text("trace_id", limit=200)
    mode = call.text("mode", required=False) or None
    if mode is not None and mode not in ("block", "continue"):
        raise ToolError("argument 'mode' must be block or continue")
    record: dict[str, Any] = {
        "trace_id": trace_id,
        "regime": call.text("regime", required=False, limit=2000) or trace_id,
        "handle": call.text("handle", required=False, limit=200) or trace_id,
        "reason": call.text("reason", required=False),
    }
    if mode is not None:
        record["mode"] = mode
    path = call.runtime.workspace / PROVISIONING_MARKER
    try:
        write_atomic(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise ToolError(f"could not record the approval request: {exc}") from None
    return {
        "status": "pending",
        "handle": record["handle"],
        "mode": mode or "block unless your turn also changed the workspace",
        "detail": "the loop registers the ask after your turn; an operator approves with `crucible approve`",
    }


def _steer_inbox(call: ToolCall) -> Mapping[str, Any]:
    steers = call.runtime.pending_steers()
    return {"pending": steers, "count": len(steers)}


_EVIDENCE = {"type": "array", "items": {"type": "string"}, "description": "short facts: commands, errors"}

BUILTIN_TOOLS: tuple[BrokerTool, ...] = (
    BrokerTool(
        "distress",
        "Page a human. severity=error when the run cannot succeed without one (the same environment "
        "failure every turn, a missing tool or permission): the run suspends after this turn. "
        "warn or info only leave a note on the next row.",
        _distress,
        {
            "type": "object",
            "properties": {
                "severity": {"type": "string", "enum": list(DISTRESS_SEVERITIES)},
                "reason": {"type": "string"},
                "evidence": _EVIDENCE,
            },
            "required": ["severity", "reason"],
        },
    ),
    BrokerTool(
        "escalate",
        "Hand the run to a human when no change can be judged fairly (the objective is infeasible as "
        "specified, the harness cannot do it, information is missing). The run stops after this turn.",
        _escalate,
        {
            "type": "object",
            "properties": {
                "category": {"type": "string", "enum": list(ESCALATION_CATEGORIES)},
                "reason": {"type": "string"},
                "evidence": _EVIDENCE,
            },
            "required": ["category", "reason"],
        },
    ),
    BrokerTool(
        "request_approval",
        "Ask for a grant only a human may give (a new measurement regime, provisioning). mode=block "
        "parks the run until an operator answers; mode=continue keeps iterating meanwhile.",
        _request_approval,
        {
            "type": "object",
            "properties": {
                "trace_id": {"type": "string", "description": "what is asked for, as a stable id"},
                "regime": {"type": "string", "description": "the regime the run moves to when approved"},
                "mode": {"type": "string", "enum": ["block", "continue"]},
                "handle": {"type": "string"},
                "reason": {"type": "string"},
            },
            "required": ["trace_id"],
        },
    ),
    BrokerTool(
        "steer_inbox",
        "Read the operator's steering that has arrived but is not yet in your prompt.",
        _steer_inbox,
    ),
)
