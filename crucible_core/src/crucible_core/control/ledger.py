"""The admission ledger (state/admissions.jsonl, RFC-0001:C-LEDGER): every operator input, admitted then settled.

Per key there is exactly one `admitted` line and at most one `settled` line; the first
outcome wins. The ledger is written from the bridge's thread (admit) and the loop (settle),
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

from crucible_core.contract.records import value_methods
from crucible_core.control.commands import MUTATING, BadRequest, payload_of
from crucible_core.manifest.paths import write_atomic

MAX_ID_BYTES = 256
OUTCOMES = frozenset({"applied", "superseded", "rejected"})


class IdempotencyConflict(Exception):
    """The same id arrived with a different payload: refused, and nothing was written."""


@value_methods
@attrs.define(repr=False, eq=False)
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


@value_methods
@attrs.frozen(repr=False, eq=False)
class Admission:
    entry: Entry
    dup: bool = False


def _write_line(path: Path, record: Mapping[str, Any]) -> bytes:
    line = (json.dumps({"v": 1, **record}, separators=(",", ":"), default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return line


def _admitted(ev: Mapping[str, Any]) -> Entry:
    """An admitted line read back, validated as the bridge validated it; ValueError says what is wrong."""
    key, seq, input_ = ev.get("key"), ev.get("seq"), ev.get("input")
    if not valid_id(key):
        raise ValueError("its key is not a non-empty string")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise ValueError(f"its seq {str(seq)[:40]!r} is not a whole number >= 0")
    if not isinstance(input_, str) or input_ not in MUTATING:
        raise ValueError(f"its input {str(input_)[:40]!r} is not a known command")
    recorded = {k: v for k, v in ev.items() if k not in ("v", "kind", "key", "seq", "ts", "input")}
    try:
        checked = payload_of(str(input_), recorded)
    except BadRequest as exc:
        raise ValueError(str(exc)) from None
    unknown = sorted(set(recorded) - set(checked))
    if unknown:
        raise ValueError(f"it carries unknown fields ({', '.join(unknown)[:80]})")
    return Entry(str(key), seq, str(input_), checked)


def fold_ledger(events: Iterable[Mapping[str, Any]], problems: list[str] | None = None) -> dict[str, Entry]:
    """Entries by key, in admission order; settled lines after the first are ignored.

    A damaged record (hand-edited, or written by something else) is skipped, never trusted:
    what it would have done is not re-armed, and `problems` gets one line saying why.
    """
    entries: dict[str, Entry] = {}
    skipped = problems if problems is not None else []
    for ev in events:
        kind, key = ev.get("kind"), ev.get("key")
        if kind == "admitted":
            if isinstance(key, str) and key in entries:
                continue
            try:
                entry = _admitted(ev)
            except ValueError as exc:
                skipped.append(f"skipped a damaged admission record ({str(key)[:40]!r}): {exc}")
                continue
            entries[entry.key] = entry
        elif kind == "settled" and isinstance(key, str) and key in entries and entries[key].outcome is None:
            outcome = ev.get("outcome")
            if not isinstance(outcome, str) or outcome not in OUTCOMES:
                skipped.append(f"skipped a damaged settled record for {key[:40]!r}: unknown outcome")
                continue
            entries[key].outcome = str(outcome)
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
        self.problems: list[str] = []  # what reading the file back skipped; the run notes them
        # Everything the file holds, as read and written by this process: what a restore puts
        # back if the file is deleted or cut short (None: the file could not be read).
        self._content: bytearray | None = bytearray()
        try:
            with open(path, "rb") as handle:
                self._content = bytearray(handle.read())
            # the log's line decoder loads only when there is a ledger to read (a fresh run has none)
            from crucible_core.contract.fold import decode_lines

            self.entries = fold_ledger(decode_lines(bytes(self._content).splitlines()), self.problems)
        except FileNotFoundError:
            self.entries = {}
        except OSError as exc:  # a directory in its place, unreadable: go on without what it held
            self.entries = {}
            self._content = None
            self.problems.append(
                f"the admission ledger {path} could not be read ({exc.strerror or exc}); "
                "operator inputs recorded there are not re-armed, and new ones cannot be recorded until it is fixed"
            )
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
            self._wrote(
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
                self._wrote(
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

    def _wrote(self, path: Path, record: Mapping[str, Any]) -> None:
        line = _write_line(path, record)
        if self._content is not None:
            self._content += line

    def restore_if_damaged(self) -> str | None:
        """Rewrite the file from what this process knows it holds when it was deleted or cut short."""
        with self._lock:
            if self._content is None:
                return None
            try:
                size: int | None = os.stat(self.path).st_size
            except FileNotFoundError:
                size = None
            if size == len(self._content) or (size is None and not self._content):
                return None
            write_atomic(self.path, bytes(self._content), mode=0o600)
            return f"the admission ledger ({'deleted' if size is None else 'changed'})"

    def owed(self) -> list[Entry]:
        """Admitted inputs with no settled line, in admission order."""
        with self._lock:
            return sorted((e for e in self.entries.values() if e.outcome is None), key=lambda e: e.seq)

    def granted(self, inputs: frozenset[str]) -> list[Entry]:
        """The admissions among `inputs` that were not rejected, in admission order."""
        with self._lock:
            found = [e for e in self.entries.values() if e.input in inputs and e.outcome != "rejected"]
        return sorted(found, key=lambda e: e.seq)

    def latest(self, inputs: frozenset[str]) -> Entry | None:
        """The most recent admission among `inputs` that was not rejected (a level: pause, budget)."""
        found = self.granted(inputs)
        return found[-1] if found else None


def valid_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value.encode("utf-8")) <= MAX_ID_BYTES
