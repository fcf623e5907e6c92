"""The tools every run's broker offers: request_approval and steer_inbox (crucible-plugin-distress adds distress and escalate).

request_approval writes the same marker an agent may write itself (PROVISIONING_PENDING.json),
so the loop takes it at the same safe point whichever way it came.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crucible_core.api import (
    PROVISIONING_MARKER,
    BrokerTool,
    ToolCall,
    ToolError,
    write_atomic,
)


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


BUILTIN_TOOLS: tuple[BrokerTool, ...] = (
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
