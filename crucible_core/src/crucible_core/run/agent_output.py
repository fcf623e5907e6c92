"""The per-turn cap on agent output written to the session log: the head as events, then only the tail.

An agent can print without bound (a runaway loop, a test suite in verbose mode, a hostile
proposer). Its text events are evidence, so the first part of each turn is logged as it
arrives; once a turn has spent its allowance, further text is not logged but its last
characters are kept, and at the end of the turn one event carries that tail with a count of
what was left out. Memory stays flat: nothing beyond the tail is held.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from typing import Any

# Event kinds that carry the agent's free text (both harnesses and the command backend).
TEXT_KINDS = frozenset({"agent_text", "agent_thinking", "agent_tool_call", "agent_tool_result"})
MAX_TURN_CHARS = 256 * 1024  # logged text per turn, all text events together
TAIL_CHARS = 4000  # kept from what came after the allowance was spent

Emit = Callable[[str, Mapping[str, Any]], None]


def _size_and_text(fields: Mapping[str, Any]) -> tuple[int, str]:
    text = fields.get("text")
    if isinstance(text, str):
        return len(text), text
    encoded = json.dumps(dict(fields), default=str, separators=(",", ":"))
    return len(encoded), encoded


class TurnOutputCap:
    """Wraps one turn's event sink; `finish()` writes the summary of what was left out (if any)."""

    def __init__(self, emit: Emit, *, limit: int = MAX_TURN_CHARS, tail: int = TAIL_CHARS) -> None:
        self._emit = emit
        self.limit = limit
        self.tail_chars = tail
        self.used = 0
        self.dropped_events = 0
        self.dropped_chars = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_size = 0

    def __call__(self, kind: str, fields: Mapping[str, Any]) -> None:
        if kind not in TEXT_KINDS:
            self._emit(kind, fields)
            return
        size, text = _size_and_text(fields)
        if self.dropped_events == 0 and self.used + size <= self.limit:
            self.used += size
            self._emit(kind, fields)
            return
        self.dropped_events += 1
        self.dropped_chars += size
        self._keep(text[-self.tail_chars :])

    def _keep(self, text: str) -> None:
        self._tail.append(text)
        self._tail_size += len(text)
        while self._tail_size - len(self._tail[0]) >= self.tail_chars:
            self._tail_size -= len(self._tail.popleft())

    def finish(self) -> None:
        if not self.dropped_events:
            return
        tail = "\n".join(self._tail)[-self.tail_chars :]
        self._emit(
            "agent_text",
            {
                "text": tail,
                "truncated": {
                    "dropped_events": self.dropped_events,
                    "dropped_chars": self.dropped_chars,
                    "tail_chars": len(tail),
                },
            },
        )
        self._emit(
            "note",
            {
                "level": "info",
                "text": f"agent output over the per-turn log allowance of {self.limit} characters: "
                f"{self.dropped_events} events ({self.dropped_chars} characters) were not logged; "
                f"their last {len(tail)} characters are in the agent_text event above",
            },
        )
