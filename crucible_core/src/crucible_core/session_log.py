"""The append-only session log (state/session.jsonl): redacted NDJSON, one `seq` per line, flushed per line, torn tails skipped."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from crucible_core.contract import wire
from crucible_core.contract.json_bounds import without_lone_surrogates
from crucible_core.errors import RunFailed, WorkspaceError
from crucible_core.redact import Redactor

WIRE_VERSION = wire.WIRE_VERSION
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

Observer = Callable[[Mapping[str, Any]], None]
_TWIN_BATCH_BYTES = 64 * 1024  # the most the twin lags the log by, in memory

# One encoder for every line, made once: json.dumps with any option builds a new one per call,
# which cost about twice the encoding of a short line. No cycle check: a line is a tree the
# wire unstructured.
_encode_line = json.JSONEncoder(separators=(",", ":"), default=str, check_circular=False).encode


class SessionLog:
    """Writes events; every event is redacted before it reaches disk, then shown to observers.

    Each line is written with one write() and flushed, so a SIGKILL leaves at most one torn
    line at the tail, which readers skip.

    The state directory sits where a local agent can reach it, so the log keeps a twin: an
    unlinked file no other process can name, holding every line (copied in batches, caught up
    before it is read: it dies with the process like the lines not yet copied). When the log is
    deleted, replaced or cut short (`rm -rf ../state`, `> session.jsonl`),
    `restore_if_damaged()` puts the whole log back from the twin.
    """

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self.observers: list[Observer] = []
        # The broker records tool calls from its own thread; one event (line and observers) at a
        # time. Re-entrant: an observer that fails is noted through emit on the same thread.
        self._lock = threading.RLock()
        # The log's directory is the run's state directory: private to the user who runs the
        # engine (0700), and the log itself 0600, whatever an earlier version or umask left.
        path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(path.parent, PRIVATE_DIR_MODE)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
        os.fchmod(self._fd, PRIVATE_FILE_MODE)
        self._ident = _ident(self._fd)
        self._repair_torn_tail()
        self._twin = tempfile.TemporaryFile(dir=path.parent, buffering=0)  # noqa: SIM115 (closed in close())
        lines = 0
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                self._twin.write(chunk)
                lines += chunk.count(b"\n")
        self._size = os.fstat(self._twin.fileno()).st_size
        # Lines not yet copied to the twin: it is read only to put the log back, and dies with
        # the process, so it is written in batches (one write per line cost a system call each)
        # and caught up before it is read.
        self._twin_pending: list[bytes] = []
        self._twin_pending_bytes = 0
        # Every line carries `seq`, its place in the log, continued across resumptions; a log an
        # older writer left (no seq) is counted in lines.
        last = _last_seq(self._twin.fileno(), self._size)
        self._seq = last if last is not None else lines

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

    def emit(self, event: wire.Event) -> dict[str, Any]:
        """Write one wire event (stamped with the time) and return the line's object as written."""
        with self._lock:
            self._seq += 1
            obj: dict[str, Any] = self.redactor.obj(wire.envelope(event, round(time.time(), 3), self._seq))
            text = _encode_line(obj)
            if "\\ud" in text:  # the encoder writes every non-ASCII character as a lowercase escape
                # a lone surrogate that reached an event (whatever its source) is written, and
                # shown to observers, as U+FFFD: no reader of this line can then fail to print it
                obj = without_lone_surrogates(obj)
                text = _encode_line(obj)
            data = (text + "\n").encode("utf-8")
            os.write(self._fd, data)
            self._twin_pending.append(data)
            self._twin_pending_bytes += len(data)
            if self._twin_pending_bytes >= _TWIN_BATCH_BYTES:
                self._catch_up_twin()
            self._size += len(data)
            for observer in list(self.observers):
                observer(obj)
            return obj

    def damage(self) -> str | None:
        """How the file at the log's path differs from what this log wrote, or None."""
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return "deleted"
        except OSError as exc:
            return f"unreachable ({exc.strerror or exc})"
        if (on_disk.st_dev, on_disk.st_ino) != self._ident:
            return "replaced"
        if on_disk.st_size != self._size:
            return "truncated" if on_disk.st_size < self._size else "appended to"
        return None

    def restore_if_damaged(self) -> str | None:
        """Put the log back from its twin when its file was damaged; return what was wrong.

        Holds the emit lock: the broker's thread must not write to a descriptor being swapped.
        """
        with self._lock:
            return self._restore_if_damaged()

    def _restore_if_damaged(self) -> str | None:
        """The restore itself (see restore_if_damaged).

        Raises RunFailed when the path cannot be written (e.g. a file now stands where the
        state directory was); `close()` then saves the log beside the state directory.
        """
        damage = self.damage()
        if damage is None:
            return None
        try:
            self._rewrite_from_twin(self.path)
            fresh = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise RunFailed(
                f"the session log {self.path} was {damage} and could not be put back: {exc}",
                hint="something outside the engine (the agent?) removed or blocked the state directory; "
                f"the log is saved to {self.rescue_path} when the run ends",
            ) from exc
        os.close(self._fd)
        self._fd = fresh
        self._ident = _ident(fresh)
        return damage

    @property
    def rescue_path(self) -> Path:
        return self.path.parent.parent / f"{self.path.parent.name}-rescued-{self.path.name}"

    def _catch_up_twin(self) -> None:
        if self._twin_pending:
            self._twin.write(b"".join(self._twin_pending))
            self._twin_pending.clear()
            self._twin_pending_bytes = 0

    def _rewrite_from_twin(self, target: Path) -> None:
        self._catch_up_twin()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.restore{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
        try:
            offset = 0
            while offset < self._size:
                chunk = os.pread(self._twin.fileno(), min(1 << 20, self._size - offset), offset)
                if not chunk:
                    break
                os.write(fd, chunk)
                offset += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.restore_if_damaged()
        except RunFailed:
            with contextlib.suppress(OSError):  # last resort: the log beside the state directory
                self._rewrite_from_twin(self.rescue_path)
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
            self._twin.close()


def _ident(fd: int) -> tuple[int, int]:
    """(st_dev, st_ino) of an open descriptor's file: fixed while it is open, so taken once."""
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _last_seq(fd: int, size: int, window: int = 1 << 20) -> int | None:
    """The `seq` of the last line in the log's final `window` bytes that carries one, or None."""
    start = max(0, size - window)
    tail = os.pread(fd, size - start, start)
    for raw in reversed(tail.split(b"\n")):
        line = wire.decode_line(raw)
        if line is not None and line.seq is not None:
            return line.seq
    return None


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO"}


def log_size(path: Path) -> int:
    """The size of the session log at `path`, 0 when there is none.

    Raises WorkspaceError when something other than a regular file stands there (a directory,
    a link, a FIFO): the engine neither reads through it nor appends to it.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise WorkspaceError(
            f"cannot read the session log {path}: {exc.strerror or exc}",
            hint="make the state directory readable again, then run the same command",
        ) from None
    if not stat.S_ISREG(st.st_mode):
        what = _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
        raise WorkspaceError(
            f"the session log {path} is {what}, not a regular file",
            hint="move it aside; put a copy of the log back and resume, or move the workspace "
            "aside too and start afresh",
        )
    return st.st_size


def read_lines(path: Path) -> Iterator[wire.Line]:
    """Every decodable line of a session log, through the wire; blank, torn and mistyped lines are skipped."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        yield from wire.decode_lines(handle)


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object line of a session log as written (tests and tools that want raw shapes)."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        for raw in handle:
            event = wire.parse_object(raw)
            if event is not None:
                yield event
