"""The jsonl reporter: every session-log event, as written, on standard output."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from crucible_core.protocols import ReporterContext


class JsonlReporter:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    @classmethod
    def from_context(cls, ctx: ReporterContext) -> JsonlReporter:
        # Machine-readable events go to stdout so they can be piped; people read stderr.
        return cls(sys.stdout)

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.stream.write(json.dumps(event, separators=(",", ":"), default=str) + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()
