"""A CLI's JSON-lines stream read as it arrives: one object a line, a line it cannot use counted, never raised.

The reader runs on the supervisor's stdout pump: raising there would stop the pipe being
drained and stall the CLI until its deadline, so a line it fails on is kept (clipped) as
evidence of a broken stream instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crucible_harness_endpoint import events

_KEPT_BAD_LINES = 3


@attrs.define
class JsonStream:
    undecodable: int = attrs.field(default=0, kw_only=True)
    bad_lines: list[str] = attrs.field(factory=list, kw_only=True)

    def feed(self, line: str) -> None:
        stripped = line.strip()
        if not stripped or self.skip(stripped):
            return
        try:
            message = json.loads(stripped)
        except (ValueError, RecursionError):  # a deeply nested line is a bad line too
            message = None
        if not isinstance(message, dict):
            self.bad(stripped)
            return
        try:
            self.event(message)
        except Exception as exc:
            self.bad(f"{stripped} ({exc!r})")

    def skip(self, line: str) -> bool:
        """Whether to pass over a line unread."""
        return False

    def event(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def bad(self, line: str) -> None:
        self.undecodable += 1
        if len(self.bad_lines) < _KEPT_BAD_LINES:
            self.bad_lines.append(events.clip(line, 200))

    def bad_note(self) -> str:
        """What the unusable lines were, for a turn's note; empty when there were none."""
        if not self.undecodable:
            return ""
        return f"{self.undecodable} undecodable stream line(s), e.g. {self.bad_lines[0]!r}"
