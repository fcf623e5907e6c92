"""The jsonl reporter: every session-log event, as written (the wire's line objects), on standard output."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from crucible_core.protocols import ReporterContext
from crucible_core.reporters.output import QuietOnClose


class JsonlReporter:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.output = QuietOnClose(stream)  # `| head` ends the view, never the run

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> JsonlReporter:
        # Machine-readable events go to stdout so they can be piped; people read stderr.
        return cls(sys.stdout)

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.output.line(json.dumps(event, separators=(",", ":"), default=str))

    def close(self) -> None:
        self.output.flush()
