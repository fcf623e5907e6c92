"""The agent event kinds a harness emits (core translates them to the session wire) and the cap on each field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

AGENT_START: Final = "agent_start"  # {harness, model, version?, tools?}
AGENT_TEXT: Final = "agent_text"  # {text}
AGENT_THINKING: Final = "agent_thinking"  # {text}
AGENT_TOOL_CALL: Final = "agent_tool_call"  # {id, name, input}
AGENT_TOOL_RESULT: Final = "agent_tool_result"  # {id, is_error, content}
AGENT_USAGE: Final = "agent_usage"  # {input_tokens, output_tokens, cache_*_tokens, cost_usd, models}
AGENT_RETRY: Final = "agent_retry"  # {attempt, error_status, delay_ms}
AGENT_RESULT: Final = "agent_result"  # {ok, subtype, turns, cost_usd, text}

# The log is read by people and viewers: whole files and long test output belong in the workspace.
MAX_FIELD_CHARS = 4000


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def clip_value(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """Every string in a JSON-like value clipped; a value too large as a whole becomes its clipped JSON."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        clipped = {str(k): clip_value(v, limit) for k, v in list(value.items())[:200]}
        encoded = json.dumps(clipped, default=str)
        return clipped if len(encoded) <= 4 * limit else clip(encoded, limit)
    if isinstance(value, list | tuple):
        return [clip_value(v, limit) for v in value[:200]]
    return value


def text(value: Any) -> str | None:
    """A JSON field as a string, or None when it is not one."""
    return value if isinstance(value, str) else None


def table(value: Any) -> Mapping[str, Any]:
    """A JSON field as an object, or an empty one when it is not one."""
    return value if isinstance(value, Mapping) else {}


def count(value: Any) -> int:
    """A JSON token count: a non-negative integer, anything else zero."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


NOTE_CHARS = 600  # a turn's note: one line in the log and the console


def note(*parts: str) -> str:
    """A turn's note from its non-empty parts."""
    return clip("; ".join(p for p in parts if p), NOTE_CHARS)


def stderr_tail(stderr: str, lines: int = 4) -> str:
    """The last lines a program printed on stderr, on one line: usually why it stopped."""
    kept = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-lines:]
    return clip(" | ".join(kept), 400)
