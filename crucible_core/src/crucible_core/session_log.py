"""The append-only session log (state/session.jsonl): redacted NDJSON, flushed per line, torn tails skipped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from crucible_core.redact import Redactor

WIRE_VERSION = 1

Observer = Callable[[Mapping[str, Any]], None]


def encode_event(kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"v": WIRE_VERSION, "kind": kind, "ts": round(time.time(), 3), **fields}


class SessionLog:
    """Writes events; every event is redacted before it reaches disk, then shown to observers.

    Each line is written with one write() and flushed, so a SIGKILL leaves at most one torn
    line at the tail, which readers skip.
    """

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.observers: list[Observer] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._repair_torn_tail()

    def _repair_torn_tail(self) -> None:
        # A predecessor killed mid-write may have left a line without its newline; terminate it
        # so our first event starts on a line of its own (readers then skip the torn one).
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as handle:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                os.write(self._fd, b"\n")

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = self.redactor.obj(encode_event(kind, fields))
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        os.write(self._fd, line.encode("utf-8"))
        for observer in list(self.observers):
            observer(event)
        return event

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every decodable event of a session log; blank, torn and foreign lines are skipped."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(event, dict) and isinstance(event.get("kind"), str):
                yield event
