"""The agent event kinds a codex turn writes (the same vocabulary as every harness), and field caps."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

# shared with every harness (core's event_bounds); re-exported, the plugin's modules read them from here
from crucible_core.api import MAX_FIELD_CHARS as MAX_FIELD_CHARS
from crucible_core.api import clip as clip
from crucible_core.api import clip_value as clip_value

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
