"""The agent event kinds a codex turn writes (the same vocabulary as every harness), and field caps."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Final

AGENT_SESSION: Final = "agent_session"  # {session, action: started, turn}
AGENT_START: Final = "agent_start"  # {harness, model, version?, tools}
AGENT_TEXT: Final = "agent_text"  # {text}
AGENT_THINKING: Final = "agent_thinking"  # {text}
AGENT_TOOL_CALL: Final = "agent_tool_call"  # {id, name, input}
AGENT_TOOL_RESULT: Final = "agent_tool_result"  # {id, is_error, content}
AGENT_USAGE: Final = "agent_usage"  # {input_tokens, output_tokens, cache_*_tokens, cost_usd, models}
AGENT_RETRY: Final = "agent_retry"  # {attempt, error_status}: the CLI retries the provider
AGENT_RESULT: Final = "agent_result"  # {ok, subtype, turns, cost_usd, text}
AGENT_NOTICE: Final = "agent_notice"  # {message}: a non-fatal error item (no wire kind: an agent log line)

# A session log is read by people and viewers: a whole file or a megabyte of command output
# belongs in the workspace, not in every event.
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
        clipped = {str(k): clip_value(v, limit) for k, v in list(value.items())[:200]}
        encoded = json.dumps(clipped, default=str)
        return clipped if len(encoded) <= 4 * limit else clip(encoded, limit)
    if isinstance(value, list | tuple):
        return [clip_value(v, limit) for v in value[:200]]
    return value


MASK = "[REDACTED]"


def mask(value: Any, secrets: Collection[str]) -> Any:
    """Mask each secret wherever it appears in a JSON-like value (keys and strings).

    The harness handles credentials the engine's redaction never saw (a minted ChatGPT token,
    the broker's bearer): the agent program's own messages may quote them, and those become
    events and notes.
    """
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
