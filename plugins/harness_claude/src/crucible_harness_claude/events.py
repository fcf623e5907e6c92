"""The agent event vocabulary both harnesses write to the session log, and the size cap on each field."""

from __future__ import annotations

import json
from typing import Any, Final

AGENT_SESSION: Final = "agent_session"  # {session, action: started|resumed, turn}
AGENT_START: Final = "agent_start"  # {harness, model, version?, tools}
AGENT_TEXT: Final = "agent_text"  # {text}
AGENT_THINKING: Final = "agent_thinking"  # {text}
AGENT_TOOL_CALL: Final = "agent_tool_call"  # {id, name, input}
AGENT_TOOL_RESULT: Final = "agent_tool_result"  # {id, is_error, content}
AGENT_USAGE: Final = "agent_usage"  # {input_tokens, output_tokens, cache_*_tokens, cost_usd, models?}
AGENT_RETRY: Final = "agent_retry"  # {attempt, error_status, delay_ms}: the provider is being retried
AGENT_COST: Final = "agent_cost"  # {cost_usd, cost_source: stream|otlp|estimate, otlp_cost_usd, otlp_tokens}
AGENT_RESULT: Final = "agent_result"  # {ok, subtype, turns, cost_usd, duration_ms, text}

# A session log is read by people and viewers; a whole file written by a tool call, or a
# megabyte of test output in a tool result, belongs in the workspace, not in every event.
MAX_FIELD_CHARS = 4000


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def clip_value(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """Clip every string in a JSON-like value; a value too large as a whole becomes its clipped JSON."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        clipped = {str(k): clip_value(v, limit) for k, v in value.items()}
        encoded = json.dumps(clipped, default=str)
        return clipped if len(encoded) <= 4 * limit else clip(encoded, limit)
    if isinstance(value, list | tuple):
        return [clip_value(v, limit) for v in value[:200]]
    return value


def tool_result_text(content: Any) -> str:
    """Flatten a tool_result `content` (a string or a list of content blocks) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return "" if content is None else str(content)
