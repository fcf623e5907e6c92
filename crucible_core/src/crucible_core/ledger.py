"""The admission ledger (state/admissions.jsonl, RFC-0001:C-LEDGER): every operator input, admitted then settled.

Per key there is exactly one `admitted` line and at most one `settled` line; the first
outcome wins. The ledger is written from the bridge's threads (admit) and the loop (settle),
so every write and the in-memory index share one lock.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.fold import decode_lines

MAX_ID_BYTES = 256
OUTCOMES = frozenset({"applied", "superseded", "rejected"})
# Inputs a resume overrides rather than re-arms: the new process is itself the operator's answer.
OVERRIDDEN_BY_RESUME = frozenset({"stop", "abort", "approve", "deny"})


class IdempotencyConflict(Exception):
    """The same id arrived with a different payload: refused, and nothing was written."""


@attrs.define
class Entry:
    key: str
    seq: int
    input: str
    payload: dict[str, Any]  # as the operator sent it (this process) or as recorded (read back)
    outcome: str | None = None
    note: str = ""
    recorded: dict[str, Any] | None = None  # the redacted payload on disk; None: same as payload

    @property
    def on_disk(self) -> dict[str, Any]:
        return self.payload if self.recorded is None else self.recorded


@attrs.frozen
class Admission:
    entry: Entry
    dup: bool = False


def _write_line(path: Path, record: Mapping[str, Any]) -> None:
    line = json.dumps({"v": 1, **record}, separators=(",", ":"), default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def fold_ledger(events: Iterable[Mapping[str, Any]]) -> dict[str, Entry]:
    """Entries by key, in admission order; settled lines after the first are ignored."""
    entries: dict[str, Entry] = {}
    for ev in events:
        kind, key = ev.get("kind"), ev.get("key")
        if not isinstance(key, str):
            continue
        if kind == "admitted" and key not in entries:
            payload = {k: v for k, v in ev.items() if k not in ("v", "kind", "key", "seq", "ts", "input")}
            entries[key] = Entry(key, int(ev.get("seq") or 0), str(ev.get("input")), payload)
        elif kind == "settled" and key in entries and entries[key].outcome is None:
            entries[key].outcome = str(ev.get("outcome"))
            entries[key].note = str(ev.get("note") or "")
    return entries


def _unredacted(value: Any) -> Any:
    return value


class Ledger:
    """The admissions file and its index. `redact` is applied to everything written to disk:
    an operator may paste a secret into a steer, and the file is evidence like the session log.
    """

    def __init__(self, path: Path, redact: Callable[[Any], Any] = _unredacted) -> None:
        self.path = path
        self.redact = redact
        self._lock = threading.Lock()
        try:
            with open(path, "rb") as handle:
                self.entries = fold_ledger(decode_lines(handle))
        except FileNotFoundError:
            self.entries = {}
        self._seq = max((e.seq for e in self.entries.values()), default=0)

    def admit(self, input_: str, payload: Mapping[str, Any], id_: str | None = None) -> Admission:
        """Record an input before it takes effect. Raises IdempotencyConflict, or OSError if unwritable."""
        payload = dict(payload)
        recorded = self.redact(payload)
        with self._lock:
            if id_ is not None:
                known = self.entries.get(id_)
                if known is not None:
                    # Compared as recorded: after a resume only the redacted form is known.
                    if known.input != input_ or known.on_disk != recorded:
                        raise IdempotencyConflict(
                            f"idempotency conflict: id {id_!r} was admitted as {known.input} "
                            "with a different payload"
                        )
                    return Admission(known, dup=True)
            key = id_ if id_ is not None else f"auto-{uuid.uuid4().hex[:16]}"
            seq = self._seq + 1
            _write_line(
                self.path,
                {
                    "kind": "admitted",
                    "key": key,
                    "seq": seq,
                    "ts": round(time.time(), 3),
                    "input": input_,
                    **recorded,
                },
            )
            self._seq = seq
            entry = Entry(key, seq, input_, payload, recorded=recorded)
            self.entries[key] = entry
            return Admission(entry)

    def settle(self, key: str, outcome: str, note: str = "") -> bool:
        """Close an admission; False when it was already settled (the first outcome wins) or unknown."""
        assert outcome in OUTCOMES
        with self._lock:
            entry = self.entries.get(key)
            if entry is None or entry.outcome is not None:
                return False
            try:
                _write_line(
                    self.path,
                    {
                        "kind": "settled",
                        "key": key,
                        "outcome": outcome,
                        "ts": round(time.time(), 3),
                        "note": self.redact(note),
                    },
                )
            except OSError:
                return False  # the input still took effect; a resume will close it out
            entry.outcome = outcome
            entry.note = note
            return True

    def owed(self) -> list[Entry]:
        """Admitted inputs with no settled line, in admission order."""
        with self._lock:
            return sorted((e for e in self.entries.values() if e.outcome is None), key=lambda e: e.seq)

    def latest(self, inputs: frozenset[str]) -> Entry | None:
        """The most recent admission among `inputs` that was not rejected (a level: pause, budget)."""
        with self._lock:
            found = [e for e in self.entries.values() if e.input in inputs and e.outcome != "rejected"]
        return max(found, key=lambda e: e.seq) if found else None


def valid_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value.encode("utf-8")) <= MAX_ID_BYTES
