"""The broker's distress and escalate tools: the same pages and markers the commands write, for an
agent that reaches the run's broker (granted as mcp__crucible__distress and mcp__crucible__escalate)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crucible_core.api import BrokerTool, CrucibleError, ToolCall, ToolError
from crucible_distress import escalation, pages


def _distress(call: ToolCall) -> Mapping[str, Any]:
    try:
        page = pages.make(call.text("severity"), call.text("reason"), call.texts("evidence"), call.iteration)
        if page.severity != "error":
            pages.add_note(call.runtime.distress_dir, page)
            return {"status": "noted", "severity": page.severity}
        if not pages.raise_error(call.runtime.distress_dir, page):
            return {"status": "already suspending"}
    except CrucibleError as exc:
        raise ToolError(exc.render()) from None
    return {"status": "suspending", "detail": "wrap up your turn; the run waits for a human after it"}


def _escalate(call: ToolCall) -> Mapping[str, Any]:
    try:
        record = escalation.make(call.text("category"), call.text("reason"), call.texts("evidence"))
        escalation.write_marker(call.runtime.workspace, record)
    except CrucibleError as exc:
        raise ToolError(exc.render()) from None
    except OSError as exc:
        raise ToolError(f"could not write the escalation marker: {exc}; the run is NOT escalated") from None
    return {"status": "escalated", "detail": "end your turn; the run stops for a human after it"}


_EVIDENCE = {"type": "array", "items": {"type": "string"}, "description": "short facts: commands, errors"}

TOOLS: tuple[BrokerTool, ...] = (
    BrokerTool(
        "distress",
        "Page a human. severity=error when the run cannot succeed without one (the same environment "
        "failure every turn, a missing tool or permission): the run suspends after this turn. "
        "warn or info only leave a note on the next row.",
        _distress,
        {
            "type": "object",
            "properties": {
                "severity": {"type": "string", "enum": list(pages.SEVERITIES)},
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
                "category": {"type": "string", "enum": list(escalation.CATEGORIES)},
                "reason": {"type": "string"},
                "evidence": _EVIDENCE,
            },
            "required": ["category", "reason"],
        },
    ),
)
