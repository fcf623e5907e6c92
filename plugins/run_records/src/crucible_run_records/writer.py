"""Writes one run's record to its destination, off the loop's thread, idempotently.

The loop thread only folds events and asks for a write (`request`); one worker thread does the
writing, coalescing requests made while it was busy, so a slow or hung destination never holds
an iteration. Each write puts the same files at the same keys (the summary and the log
rewritten, each diff and artifact once unless its bytes changed), so a repeated or resumed write
is harmless. The end-of-run write waits at most END_SECONDS. What goes wrong costs a warning note
(handed back to the loop thread through `warnings`, since the session log is the loop's to
write), never the run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_run_records import layout
from crucible_run_records.destination import RecordAddress, RecordStore, safe_key

# The longest the end of a run waits for its record; a destination that takes longer costs a note.
END_SECONDS = 30.0
# Above this size the session log is written at the end only, so a keep's write stays small.
KEEP_LOG_BYTES = 4 << 20
# One artifact's bytes at most; larger files belong in the workspace, not the record.
MAX_ARTIFACT_BYTES = 64 << 20


@attrs.define(eq=False)
class RecordWriter:
    address: RecordAddress  # the run's folder: <destination>/<run-id>
    open_store: Callable[[], RecordStore]  # built on the worker thread (boto3 loads there)
    session_log: Path
    state: layout.RecordState = attrs.field(factory=layout.RecordState)
    warnings: list[str] = attrs.field(factory=list)
    written: dict[str, str] = attrs.field(factory=dict)  # key -> digest of the bytes last written
    _artifacts: dict[str, bytes] = attrs.field(factory=dict)
    _lock: threading.Condition = attrs.field(factory=threading.Condition)
    _wanted: int = 0  # write requests made
    _done: int = 0  # requests the worker has served (a write covers every request before it)
    _with_log: bool = False
    _closing: bool = False
    final_pending: bool = False  # the end-of-run write went through: the shutdown's is worth waiting for
    _store: RecordStore | None = None
    _thread: threading.Thread | None = None

    # -- the loop thread -------------------------------------------------------------------------
    def add(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            self.state.add(event)

    def add_artifact(self, name: str, data: bytes) -> None:
        """Queue a file for `artifacts/<name>` (a plain relative name), written with the next write."""
        key = layout.artifact_key(safe_key(name))
        if len(data) > MAX_ARTIFACT_BYTES:
            raise ValueError(f"artifact {name!r} is {len(data)} bytes, over {MAX_ARTIFACT_BYTES}")
        with self._lock:
            self._artifacts[key] = bytes(data)

    def request(self, *, with_log: bool) -> int:
        """Ask for a write of everything so far; returns its ticket for `wait`."""
        with self._lock:
            self._wanted += 1
            self._with_log = self._with_log or with_log
            ticket = self._wanted
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="crucible-run-record", daemon=True)
                self._thread.start()
            self._lock.notify_all()
            return ticket

    def wait(self, ticket: int, seconds: float) -> bool:
        """Whether the write `ticket` asked for finished within `seconds`."""
        with self._lock:
            return self._lock.wait_for(lambda: self._done >= ticket, timeout=seconds)

    def finish(self, seconds: float | None = None) -> None:
        """The end of the run: one last write with the log, waited for at most `seconds` (END_SECONDS)."""
        seconds = END_SECONDS if seconds is None else seconds
        ticket = self.request(with_log=True)
        if not self.wait(ticket, seconds):
            self.warn(f"the run record at {self.address} was not finished within {seconds:g} s")
        self.close()

    def close(self) -> None:
        """No more writes: the worker ends once the one in hand (if any) is done."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()

    def warn(self, text: str) -> None:
        with self._lock:
            self.warnings.append(text)

    def take_warnings(self) -> list[str]:
        with self._lock:
            taken, self.warnings = self.warnings, []
            return taken

    # -- the worker thread -----------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._wanted > self._done or self._closing)
                if self._wanted <= self._done:
                    return  # closing, nothing more asked
                ticket, with_log, self._with_log = self._wanted, self._with_log, False
                files = self._files()
            try:
                self._write(files, with_log)
            except Exception as exc:  # a destination's failure costs this write, never the run
                self.warn(f"could not write the run record to {self.address}: {_describe(exc)}")
            with self._lock:
                self._done = ticket
                self._lock.notify_all()

    def _files(self) -> dict[str, bytes]:
        """The record's files but the log, as of now (under the lock)."""
        files = {layout.diff_key(n): layout.diff_bytes(diff) for n, diff in self.state.diffs.items()}
        files.update(self._artifacts)
        files[layout.SUMMARY] = layout.summary_bytes(self.state)  # last: a reader sees it complete
        return files

    def _write(self, files: dict[str, bytes], with_log: bool) -> None:
        if self._store is None:
            self._store = self.open_store()
        store = self._store
        log = self._read_log(with_log)
        if log is not None:
            files = {layout.SESSION_LOG: log, **files}
        for key, data in files.items():
            digest = hashlib.sha256(data).hexdigest()
            if self.written.get(key) == digest:
                continue  # already there: an unchanged diff or artifact is written once
            store.put(key, data)
            self.written[key] = digest

    def _read_log(self, with_log: bool) -> bytes | None:
        try:
            size = self.session_log.stat().st_size
            if not with_log and size > KEEP_LOG_BYTES:
                return None  # large: the end-of-run write carries it
            return self.session_log.read_bytes()
        except OSError as exc:
            self.warn(f"could not read the session log for the run record: {exc}")
            return None


def _describe(exc: BaseException) -> str:
    from crucible_core.api import CrucibleError

    if isinstance(exc, CrucibleError):
        return exc.render()
    return f"{type(exc).__name__}: {exc}"
