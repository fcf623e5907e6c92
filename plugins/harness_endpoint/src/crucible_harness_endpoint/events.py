"""The agent event kinds a harness emits (core translates them to the session wire) and the cap on each field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# shared with every harness (core's event_bounds); re-exported, the plugin's modules read them from here
from crucible_core.api import MAX_FIELD_CHARS as MAX_FIELD_CHARS
from crucible_core.api import clip as clip
from crucible_core.api import clip_value as clip_value

AGENT_START: Final = "agent_start"  # {harness, model, version?, tools?}
AGENT_TEXT: Final = "agent_text"  # {text}
AGENT_THINKING: Final = "agent_thinking"  # {text}
AGENT_TOOL_CALL: Final = "agent_tool_call"  # {id, name, input}
AGENT_TOOL_RESULT: Final = "agent_tool_result"  # {id, is_error, content}
AGENT_USAGE: Final = "agent_usage"  # {input_tokens, output_tokens, cache_*_tokens, cost_usd, models}
AGENT_RETRY: Final = "agent_retry"  # {attempt, error_status, delay_ms}
AGENT_RESULT: Final = "agent_result"  # {ok, subtype, turns, cost_usd, text}


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
