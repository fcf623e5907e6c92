"""The agent events an acp turn writes to the session log, the driver's line protocol, and the bounds on both.

The first nine kinds are the vocabulary every harness shares (a reader of the log sees an acp
turn the way it sees a claude turn); the mediation kinds are this harness's evidence of what the
agent tried and what it was allowed, and reach the log as agent `log` lines labelled with them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Final

# shared with every harness (core's event_bounds); re-exported, the plugin's modules read them from here
from crucible_core.api import MAX_FIELD_CHARS as MAX_FIELD_CHARS
from crucible_core.api import clip as clip
from crucible_core.api import clip_value as clip_value

AGENT_SESSION: Final = "agent_session"  # {session, action: started, turn}
AGENT_START: Final = "agent_start"  # {harness, agent, version, model, permission_mode}
AGENT_TEXT: Final = "agent_text"  # {text}
AGENT_THINKING: Final = "agent_thinking"  # {text}
AGENT_TOOL_CALL: Final = "agent_tool_call"  # {id, name, title, kind, input, locations}
AGENT_TOOL_RESULT: Final = "agent_tool_result"  # {id, is_error, content}
AGENT_USAGE: Final = "agent_usage"  # {input_tokens, output_tokens, cache_*_tokens, cost_usd}
AGENT_RESULT: Final = "agent_result"  # {ok, subtype (the stop reason), cost_usd, duration_ms, text}
AGENT_PLAN: Final = "agent_plan"  # {entries: [{content, status}]}
# Mediation evidence: every decision, allowed or denied.
AGENT_PERMISSION: Final = "agent_permission"  # {id, tool, family, decision, reason}
AGENT_FILE: Final = "agent_file"  # {operation: read|write, path, decision, reason}
AGENT_TERMINAL: Final = "agent_terminal"  # {id, command, cwd, decision, reason} / {id, exit_code}
AGENT_NOTE: Final = "agent_note"  # {text}: something the harness did on its own (no model choice)

KINDS: frozenset[str] = frozenset(
    {
        AGENT_START,
        AGENT_TEXT,
        AGENT_THINKING,
        AGENT_TOOL_CALL,
        AGENT_TOOL_RESULT,
        AGENT_USAGE,
        AGENT_RESULT,
        AGENT_PLAN,
        AGENT_PERMISSION,
        AGENT_FILE,
        AGENT_TERMINAL,
        AGENT_NOTE,
    }
)

# The driver's stdout lines, one JSON object each: {"event": kind, "fields": {...}} for the log,
# {"cost_usd": x} whenever the agent reports its running cost, and one {"end": {...}} last.
LINE_EVENT: Final = "event"
LINE_COST: Final = "cost_usd"
LINE_END: Final = "end"

MASK = "[REDACTED]"


def mask(value: Any, secrets: Collection[str]) -> Any:
    """Replace every secret value wherever it appears in a JSON-like value (keys and strings)."""
    live = sorted((s for s in secrets if s), key=len, reverse=True)
    if not live:
        return value
    if isinstance(value, str):
        for secret in live:
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, Mapping):
        return {mask(str(k), live): mask(v, live) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask(v, live) for v in value]
    return value


def content_text(content: Any) -> str:
    """Flatten ACP content (a content block, a list of tool-call contents, raw output) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for text in (content_text(item) for item in content) if text)
    if isinstance(content, Mapping):
        kind = content.get("type")
        if kind == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        if kind == "content":
            return content_text(content.get("content"))
        if kind == "diff":
            return f"[diff of {content.get('path')}]"
        if kind == "terminal":
            return f"[terminal {content.get('terminalId')}]"
        return f"[{kind or 'block'}]"
    return "" if content is None else json.dumps(content, default=str)
