"""The one supervisor every child process goes through: own group, deadline, caps, reaped on every path.

Each child gets its own session (so a group kill reaches its grandchildren), a deadline after
which the whole group gets SIGTERM and then SIGKILL, and capped stdout/stderr capture, read by
the supervising thread itself in one poll with the child's exit (no pump threads). A small
guard process, started once per engine, holds the read end of a pipe from the engine: when the
engine dies for any reason (SIGKILL included) the pipe closes and the guard kills every group
still registered, and every process carrying this engine's mark in its environment, so no
child outlives the engine. The groups are registered in a small table of memory the guard
shares (a memfd it reads only once the engine is gone), so starting and ending a child costs
the engine two stores, not two pipe writes that each wake the guard. (No PR_SET_PDEATHSIG: it
needs a preexec_fn, which forces a full fork instead of vfork and costs about 2 ms per child in
a large engine process.)

After each child, its descendants that left the group (an agent's tool shell may start a
session of its own) are killed by the child's mark. Finding them by reading every
/proc/*/environ costs about 2 ms per child, so an engine process that owns its children (the
CLI) calls `adopt_orphans()`: it becomes a child subreaper, every orphan of its subtree is
re-parented to it, and the mark sweep walks only its own descendants, and only when a process
it did not start is among its children.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import attrs

from crucible_core.contract.records import value_methods

DEFAULT_CAPTURE_BYTES = 1 << 20
# The longest stdout line handed to a line callback; a stream-json line carrying a large tool
# result fits, a child printing megabytes without a newline is cut here.
DEFAULT_MAX_LINE_BYTES = 8 << 20
DEFAULT_GRACE_SECONDS = 2.0
_SHELL = "/bin/sh" if os.path.exists("/bin/sh") else None  # None: `sh` is looked up on PATH
# How long a supervised child's pipes are read after its group was killed and reaped.
PIPE_DRAIN_SECONDS = 5.0

# Every child carries this variable; its value names this engine process.
SUPERVISOR_ENV = "CRUCIBLE_SUPERVISOR"
# Looks the subreaper sweep takes at most: a victim's children re-parent here as it dies, and a
# descendant caught mid-exec has no readable environment yet, so both call for another look.
SWEEP_PASSES = 8

# The guard: at EOF on its stdin (the engine gone) it reads the group table (argv 3 and 4: the
# table's descriptor and size in bytes; every non-zero cell is a group registered then) and
# the "+pgid"/"-pgid" lines the engine wrote instead when it had no table or the table was
# full, SIGKILLs those groups, then every process whose environment carries this engine's
# supervisor mark (each child gets "<engine mark>.<n>", so one prefix names all of them).
# The mark closes the window between a fork and its registration, and catches descendants
# that left the group; only a process that scrubbed its environment and its group escapes.
# A child the engine was spawning as it died may not show its mark yet (until its exec it
# carries the engine's environment), so a pass that finds nothing is looked at once more
# after a pause before the guard gives up.
_GUARD_SOURCE = r"""
import os, signal, sys, time
mark = b"\0" + ("%s=%s." % (sys.argv[1], sys.argv[2])).encode()
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        groups.add(int(line[1:]))
    elif line[:1] == "-":
        groups.discard(int(line[1:]))
if len(sys.argv) > 4:
    table, size = int(sys.argv[3]), int(sys.argv[4])
    try:
        cells = memoryview(os.pread(table, size, 0)).cast("I")
        groups.update(pgid for pgid in cells if pgid)
    except (OSError, TypeError, ValueError):
        pass
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
me = os.getpid()
quiet = 0
for _ in range(5):
    found = False
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                environ = b"\0" + handle.read()
        except OSError:
            continue
        if mark in environ:
            found = True
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    quiet = 0 if found else quiet + 1
    if quiet == 2:
        break
    if not found:
        time.sleep(0.1)
"""


@value_methods
@attrs.frozen(repr=False, eq=False)
class Completed:
    """What a supervised child did. `exit_code` is negative for a signal, as in subprocess."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    spawn_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.spawn_error is None

    def describe_failure(self) -> str:
        if self.spawn_error:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return f"killed at its deadline after {self.duration:.1f}s"
        if self.exit_code < 0:
            return f"killed by signal {-self.exit_code}"
        return f"exited {self.exit_code}"


class _TailBuffer:
    """Keeps the last `cap` bytes written: a verdict line sits at the end of the output."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size > self.cap and len(self.chunks) > 1:
            first = self.chunks.pop(0)
            self.size -= len(first)
            self.dropped += len(first)
        if self.size > self.cap:
            only = self.chunks[0]
            cut = self.size - self.cap
            self.chunks[0] = only[cut:]
            self.size -= cut
            self.dropped += cut

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


# Groups registered with the guard at once before registration falls back to pipe lines: far
# more than any engine runs (the cells take 16 KiB).
GROUP_TABLE_CELLS = 4096


class _GroupTable:
    """The groups the guard must kill, in memory it shares: one 32-bit cell per registered group.

    A memfd the guard inherits and reads only at the engine's death, so registering a group is a
    store into this process's own memory: no system call, and no guard woken up. A cell is
    written with one aligned 32-bit store, so the guard never reads half of a group id.
    """

    def __init__(self, fd: int, mapped: mmap.mmap) -> None:
        self.fd = fd
        self._mapped = mapped
        self._cells = memoryview(mapped).cast("I")
        self._where: dict[int, int] = {}  # group -> its cell
        self._free = list(range(GROUP_TABLE_CELLS - 1, -1, -1))

    @classmethod
    def create(cls) -> _GroupTable | None:
        """A new table, or None where the platform has no memfd (the pipe lines serve then)."""
        memfd_create = getattr(os, "memfd_create", None)
        if memfd_create is None:
            return None
        size = GROUP_TABLE_CELLS * 4
        try:
            fd = memfd_create("crucible-guard-groups", os.MFD_CLOEXEC)
        except OSError:
            return None
        try:
            os.ftruncate(fd, size)
            mapped = mmap.mmap(fd, size)
        except (OSError, ValueError):
            os.close(fd)
            return None
        return cls(fd, mapped)

    @property
    def size(self) -> int:
        return GROUP_TABLE_CELLS * 4

    def add(self, pgid: int) -> bool:
        """Register a group; False when the table is full (the caller writes a pipe line)."""
        if pgid in self._where:
            return True
        if not self._free or not 0 < pgid < 1 << 32:
            return False
        cell = self._free.pop()
        self._cells[cell] = pgid
        self._where[pgid] = cell
        return True

    def discard(self, pgid: int) -> bool:
        """End a group's registration; False when it was not in the table."""
        cell = self._where.pop(pgid, None)
        if cell is None:
            return False
        self._cells[cell] = 0
        self._free.append(cell)
        return True

    def forget(self) -> None:
        """In a forked child: let go of the parent's table without writing a cell of it."""
        self._where.clear()
        self._free.clear()
        self._cells.release()
        with contextlib.suppress(OSError, ValueError, BufferError):
            self._mapped.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class _Guard:
    """The guard process, the pipe to it and the table of groups it kills.

    A group is registered in the table (`_GroupTable`); only without one, or with the table
    full, is it told as a line down the pipe (one unbuffered write per line, far below PIPE_BUF,
    so lines from threads never interleave). The engine never writes to the pipe otherwise, so a
    guard that died is noticed by polling it (one waitpid) before each child gets its mark."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1  # the pipe's write end (the Popen's stdin)
        self._inherited: list[subprocess.Popen[bytes]] = []  # a forked child's copy of its parent's
        self._lock = threading.Lock()
        self._mark = ""
        self._children = 0
        self._table: _GroupTable | None = None
        self._table_tried = False

    def child_mark(self) -> str:
        """A fresh mark for one child, "<engine mark>.<n>"; the guard is started first (again,
        if the one before died)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is not None:
                self._drop()
            self._ensure()
            self._children += 1
            return f"{self._mark}.{self._children}"

    def _ensure(self) -> subprocess.Popen[bytes] | None:
        # Under the lock. A guard whose pipe broke was dropped by `tell`, one found dead by
        # `child_mark`, and a forked child forgets its parent's (`forget_in_child`): either way a
        # new one starts here, and is handed the same table.
        if self._proc is None:
            if not self._table_tried:
                self._table_tried = True
                self._table = _GroupTable.create()
            self._mark = f"{_pid}-{os.urandom(6).hex()}"
            argv = [sys.executable, "-S", "-c", _GUARD_SOURCE, SUPERVISOR_ENV, self._mark]
            table = self._table
            if table is not None:
                argv += [str(table.fd), str(table.size)]
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(table.fd,) if table is not None else (),
                    bufsize=0,
                )
            except OSError:
                self._proc = None
                self._fd = -1
            else:
                assert self._proc.stdin is not None
                self._fd = self._proc.stdin.fileno()
        return self._proc

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def register(self, pgid: int) -> None:
        """The guard kills this group if the engine dies before `unregister`."""
        with self._lock:
            table = self._table
            if table is not None and self._proc is not None and table.add(pgid):
                return
        self.tell(f"+{pgid}")

    def unregister(self, pgid: int) -> None:
        """The group is the engine's own affair again (its leader is about to be reaped)."""
        with self._lock:
            table = self._table
            if table is not None and table.discard(pgid):
                return
        self.tell(f"-{pgid}")

    def tell(self, line: str) -> None:
        data = f"{line}\n".encode()
        with self._lock:
            for _ in range(2):  # a guard found dead is replaced once, and told again
                if self._ensure() is None:
                    return
                try:
                    os.write(self._fd, data)
                    return
                except OSError:  # EPIPE: the guard is gone (killed); start another
                    self._drop()

    def forget_in_child(self) -> None:
        """In a forked child: the parent's guard is not ours to tell, its table not ours to write
        (the memory is shared with the parent), and our copy of its pipe must not keep it from
        seeing the parent's death."""
        proc, self._proc, self._fd = self._proc, None, -1
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            # Not ours to wait for, and not to be finalized here either (its finalizer would
            # count the parent's guard as our unwaited child).
            self._inherited.append(proc)
        table, self._table, self._table_tried = self._table, None, False
        if table is not None:
            table.forget()
        self._lock = threading.Lock()

    def _drop(self) -> None:
        proc, self._proc, self._fd = self._proc, None, -1
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.wait(timeout=1)


_guard = _Guard()
_pid = os.getpid()  # this process's id, kept current across forks (no getpid per child)


def _after_fork_in_child() -> None:
    """A forked child (no exec) starts over: its own pid, its own guard, no children yet, fresh
    locks (another thread may have held one at the fork), and no subreaper mode (the kernel does
    not pass that on to a fork)."""
    global _pid, _devnull_lock
    _pid = os.getpid()
    _guard.forget_in_child()
    _orphans.enabled, _orphans.started, _orphans.lock = False, set(), threading.Lock()
    _running.groups, _running.lock = set(), threading.Lock()
    _devnull_lock = threading.Lock()


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited, without reaping it: until it is reaped its pid, which is also
    its group's id, stays taken, so the group can still be signalled by that id safely."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped by someone else (Popen's returncode then says 0)


def _unreaped(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child's pid (its group's id) is still its own: not reaped by anyone yet."""
    if proc.returncode is not None:
        return False
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _wait_for_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for the child to exit, at most `timeout` seconds (None: no limit); True when it did.

    The child is not reaped here: the caller kills its group first, then reaps it (see `run`).
    Popen.wait(timeout) polls with growing sleeps, which adds milliseconds to every short
    command; a pidfd wakes us the moment the child exits (Linux 5.3+), else we poll.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    pidfd_open = getattr(os, "pidfd_open", None)
    pidfd = None
    if pidfd_open is not None:
        with contextlib.suppress(OSError):
            pidfd = pidfd_open(proc.pid)
    if pidfd is None:
        while not _exited(proc):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while not _exited(proc):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            poller.poll(None if remaining is None else remaining * 1000)
        return True
    finally:
        os.close(pidfd)


def kill_marked(mark: str) -> int:
    """SIGKILL every process whose environment carries exactly this child mark; return how many."""
    if not os.path.isdir("/proc"):
        return 0
    needle = f"\0{SUPERVISOR_ENV}={mark}\0".encode()
    me = os.getpid()
    killed = 0
    for _ in range(2):  # a second pass catches what the first one's victims forked meanwhile
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    environ = b"\0" + handle.read() + b"\0"
            except OSError:
                continue
            if needle in environ:
                found = True
                with contextlib.suppress(OSError):
                    os.kill(int(name), signal.SIGKILL)
                    killed += 1
        if not found:
            break
    return killed


PR_SET_CHILD_SUBREAPER = 36


class _Orphans:
    """The subreaper mode: which children this process started, so an adopted one stands out.

    `_lock` is held across a spawn and its registration, and across a scan, so a child that is
    forked but not yet registered is never taken for an orphan (and never reaped by us).
    """

    def __init__(self) -> None:
        self.enabled = False
        self.lock = threading.Lock()
        self.started: set[int] = set()

    def enable(self) -> bool:
        if self.enabled:
            return True
        if not sys.platform.startswith("linux"):
            return False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                return False
        except (OSError, AttributeError):
            return False
        self.enabled = True
        return True

    def adopted(self) -> list[int]:
        """Direct children this process did not start: orphans of its subtree, re-parented here.

        The kernel hands an orphan to the subreaper's first live thread, the main one while it
        lives, so only its children list is read (one file, not one per thread).
        """
        me = _pid
        try:
            listed = [int(x) for x in _read_proc(f"/proc/{me}/task/{me}/children").split()]
        except (OSError, ValueError):
            listed = _children(me)  # the main thread is gone: look under every thread
        guard = _guard.pid()
        return [pid for pid in listed if pid not in self.started and pid != guard]


_orphans = _Orphans()


class _Running:
    """The process groups `run` has started and not yet reaped, so an abort can end them all."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: set[int] = set()

    def add(self, pgid: int) -> None:
        with self.lock:
            self.groups.add(pgid)

    def discard(self, pgid: int) -> None:
        with self.lock:
            self.groups.discard(pgid)


_running = _Running()


def kill_running() -> int:
    """SIGKILL every child `run` is waiting on, in any thread: an abort ends the attempts in
    flight now (each `run` then reaps its child and returns as killed). Returns how many."""
    with _running.lock:
        groups = list(_running.groups)
    for pgid in groups:
        _kill_group(pgid, signal.SIGKILL)
    return len(groups)


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux): orphans of its children re-parent to it.

    Call it once from a process that starts its children only through this module (the CLI):
    the per-child sweep then reads only this process's descendants, and only when one of them
    was adopted. False where the kernel refuses; the full /proc sweep stays in force then.
    """
    return _orphans.enable()


def _read_proc(path: str) -> bytes:
    """A /proc file's whole content, read through the descriptor (no file object: this runs
    after every child)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found.extend(int(x) for x in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def _descendants(root: int) -> list[int]:
    seen: list[int] = []
    stack = _children(root)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.append(pid)
        stack.extend(_children(pid))
    return seen


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"Z"


def _sweep_adopted(mark: str) -> None:
    """Subreaper mode: kill this child's marked descendants, looking only if an orphan was adopted.

    Every orphan of this process's subtree is re-parented here, so the marked processes are all
    among its descendants; the walk reads their environments only, and runs only when a child
    this process did not start is present. Adopted children that died are reaped here (nobody
    else waits for them).
    """
    # The common case: nothing escaped, and one read of one file says so. That first look does
    # not wait for the lock, which another thread holds across its spawn: a child forked but not
    # yet registered looks adopted, and only then is the look repeated under the lock.
    if not _orphans.adopted():
        return
    with _orphans.lock:
        adopted = _orphans.adopted()
        if not adopted:
            return
        me = os.getpid()
        needle = f"\0{SUPERVISOR_ENV}={mark}\0".encode()
        for attempt in range(SWEEP_PASSES):
            if attempt:
                adopted = _orphans.adopted()
                if not adopted:
                    return
            killed: list[int] = []
            unreadable = False
            for pid in _descendants(me):
                environ = _environ(pid)
                if environ is None:
                    # In the middle of an exec the new image has no environment yet (or /proc
                    # refuses it for a moment): that process may be the one we are looking for.
                    unreadable = unreadable or not _is_zombie(pid)
                    continue
                if needle in environ:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
            for pid in adopted:
                # a killed adopted child dies promptly: wait for it; a zombie is collected
                with contextlib.suppress(ChildProcessError, OSError):
                    if pid in killed:
                        os.waitpid(pid, 0)
                    elif _is_zombie(pid):
                        os.waitpid(pid, os.WNOHANG)
            if not killed and not unreadable:
                return
            if not killed:
                time.sleep(0.01 * (attempt + 1))  # let the exec finish, then look again


def _environ(pid: int) -> bytes | None:
    """A process's initial environment framed by NULs, or None while it cannot be read (or is empty)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return b"\0" + raw + b"\0" if raw else None


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class _LineSplitter:
    """Takes a child's stdout chunk by chunk into `sink`, handing complete lines to `on_line`.

    A line longer than `max_line` is handed over cut at that length and the rest of it is
    skipped, so a child printing without a newline cannot grow the engine's memory.
    """

    def __init__(
        self, sink: _TailBuffer, on_line: Callable[[str], None] | None, max_line: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        self.sink = sink
        self.on_line = on_line
        self.max_line = max_line
        self.pending = b""
        self.skipping = False  # inside the unreported rest of an over-long line

    def feed(self, chunk: bytes) -> None:
        self.sink.add(chunk)
        on_line = self.on_line
        if on_line is None:
            return
        pending = self.pending + chunk
        *lines, pending = pending.split(b"\n")
        try:
            for line in lines:
                if not self.skipping:
                    on_line(line.decode("utf-8", errors="replace"))
                self.skipping = False
            if len(pending) > self.max_line:
                if not self.skipping:
                    on_line(pending[: self.max_line].decode("utf-8", errors="replace"))
                self.skipping = True
                pending = b""
        except BaseException:
            # The callback failed: `run` ends the child and raises; what is still read on
            # the way out goes to the capture only.
            self.on_line = None
            raise
        self.pending = pending

    def end(self) -> None:
        if self.on_line is not None and self.pending and not self.skipping:
            self.on_line(self.pending.decode("utf-8", errors="replace"))
        self.pending = b""


class Readiness:
    """One poll over many descriptors, each with the callback run when it turns readable.

    A supervisor loop puts every child it drives here (its pipes and, with pidfds, its exit),
    and anything else it waits on (an executor's wake-up pipe), so one thread sleeps in one
    system call until any of them has something to say.
    """

    def __init__(self) -> None:
        self._poller = select.poll()
        self._handlers: dict[int, Callable[[int], None]] = {}

    def add(self, fd: int, handler: Callable[[int], None]) -> None:
        self._poller.register(fd, select.POLLIN)
        self._handlers[fd] = handler

    def remove(self, fd: int) -> None:
        # before the fd is closed: a closed fd would poll as ready at once
        if self._handlers.pop(fd, None) is not None:
            self._poller.unregister(fd)

    def wait(self, timeout: float | None) -> None:
        """Sleep up to `timeout` seconds (None: no limit) and run the handlers of what turned ready."""
        try:
            events = self._poller.poll(None if timeout is None else max(0.0, timeout) * 1000)
        except InterruptedError:  # pragma: no cover - PEP 475 retries poll; kept for safety
            return
        for fd, _mask in events:
            handler = self._handlers.get(fd)
            if handler is not None:
                handler(fd)


class _Streams:
    """A child's stdout and stderr, drained by the thread that supervises it (no pump threads).

    Both pipes sit in the supervising loop's Readiness beside the child's exit: a short command
    then costs the engine no thread starts and no hand-offs between threads.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], out: _LineSplitter, err: _LineSplitter, readiness: Readiness
    ) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self._files = [proc.stdout, proc.stderr]
        self._sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        self._readiness = readiness
        for fd in self._sinks:  # read only when poll says so: a read then never blocks
            readiness.add(fd, self._read)

    def _read(self, fd: int) -> None:
        sink = self._sinks.get(fd)
        if sink is None:
            return
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            sink.feed(chunk)
        else:  # end of file: every writer of this pipe is gone
            self._readiness.remove(fd)
            del self._sinks[fd]
            sink.end()

    def drain(self, timeout: float) -> None:
        """Read both pipes to their end, at most `timeout` seconds (a writer that escaped every kill).

        On a poll of their own: a loop driving other children does not service them meanwhile.
        """
        if not self._sinks:  # the usual case: both ends were read in the poll that saw the exit
            return
        own = Readiness()
        for fd in self._sinks:
            self._readiness.remove(fd)
            own.add(fd, self._read)
        self._readiness = own
        deadline = time.monotonic() + timeout
        while self._sinks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            own.wait(remaining)
        for fd, sink in self._sinks.items():
            own.remove(fd)
            sink.end()
        self._sinks.clear()

    def close(self) -> None:
        for handle in self._files:
            handle.close()


# How often a child's exit is looked for where the kernel has no pidfds to announce it.
_EXIT_POLL_SECONDS = 0.005
_pidfd_open: Callable[[int], int] | None = getattr(os, "pidfd_open", None)  # Linux 5.3+, Python 3.9+


class Supervised:
    """One supervised child, driven step by step by the loop that owns its Readiness.

    `start` spawns it and puts its pipes and exit in the Readiness; the owner sleeps in
    `Readiness.wait` (at most until `next_wake`) and then calls `advance`, which applies the
    deadline (SIGTERM to the group, then `grace` seconds) and says when the child is done;
    `finish` then kills the group while the leader is still unreaped, reaps it, kills escaped
    descendants and returns what the child did. `run` is this loop over one child.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        mark: str,
        streams: _Streams,
        out: _TailBuffer,
        err: _TailBuffer,
        readiness: Readiness,
        started: float,
        timeout: float | None,
        grace: float,
    ) -> None:
        self.proc = proc
        self.mark = mark
        self._streams = streams
        self._out, self._err = out, err
        self._readiness = readiness
        self.started = started
        self.deadline = None if timeout is None else started + timeout
        self.grace = grace
        self.timed_out = False  # the deadline passed: the group got SIGTERM, the grace runs
        self.done = False
        self._exited = False
        self._finished: Completed | None = None
        self._finishing = False  # finish() was entered (and, with no _finished, interrupted)
        self._pidfd = -1
        if _pidfd_open is not None:
            with contextlib.suppress(OSError):
                self._pidfd = _pidfd_open(proc.pid)
        if self._pidfd >= 0:
            # The pidfd turns readable when the child exits (a zombie's too): no waitid per look.
            readiness.add(self._pidfd, self._on_exit)

    def _on_exit(self, _fd: int) -> None:
        self._exited = True
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, -1  # forgotten first: an interrupted call never closes it twice
        if fd >= 0:
            self._readiness.remove(fd)  # before closing it
            os.close(fd)

    def next_wake(self) -> float | None:
        """The monotonic time by which `advance` must run even if nothing turns ready (None: never)."""
        if self.done:
            return None
        if self._pidfd < 0 and not self._exited:
            soon = time.monotonic() + _EXIT_POLL_SECONDS
            return soon if self.deadline is None else min(soon, self.deadline)
        return self.deadline

    def advance(self, now: float) -> bool:
        """Apply what time and readiness say; True once the child is done (exited, or its grace over)."""
        if self.done:
            return True
        if not self._exited and self._pidfd < 0:
            self._exited = _exited(self.proc)
        if self._exited:
            self.done = True
        elif self.deadline is not None and now >= self.deadline:
            if _exited(self.proc):  # it exited as its time ran out: not a timeout
                self.done = True
            elif not self.timed_out:
                self.timed_out = True
                _kill_group(self.proc.pid, signal.SIGTERM)
                self.deadline = now + self.grace
            else:
                self.done = True  # the grace is over: `finish` sends SIGKILL
        return self.done

    def finish(self) -> Completed:
        """Kill the group, reap the leader, kill escaped descendants, drain the pipes (once).

        Called on every path, done or not (a deadline, an exception in the owner's loop): the
        leader may have exited while grandchildren still run, so the whole group goes.
        """
        if self._finished is not None:
            return self._finished
        self.done = True
        proc, pgid = self.proc, self.proc.pid
        # A call before this one was interrupted halfway (a second Ctrl-C lands on the thread
        # driving the children): nothing was kept, and this one does it all, but the leader may
        # be reaped already.
        again, self._finishing = self._finishing, True
        # The leader is not reaped yet, so the group's id is still its own: once reaped, the
        # id is free, and a busy machine may give it to another session leader (a task
        # running beside this one) at once. Nothing may signal the group by that id after
        # the reap.
        if not again or _unreaped(proc):
            _kill_group(pgid, signal.SIGKILL)
        _running.discard(pgid)
        _guard.unregister(pgid)
        self._close_pidfd()
        proc.wait()
        # Descendants that started a session of their own (an agent's tool shell does) left
        # the group; they still carry the child's mark.
        if _orphans.enabled:
            with _orphans.lock:
                _orphans.started.discard(proc.pid)
            _sweep_adopted(self.mark)
        else:
            kill_marked(self.mark)
        # What the group wrote before it died is still in the pipes (bounded, as a writer
        # that escaped every kill could hold a pipe open).
        try:
            self._streams.drain(PIPE_DRAIN_SECONDS)
        finally:
            self._streams.close()
        self._finished = Completed(
            exit_code=proc.returncode if proc.returncode is not None else -signal.SIGKILL,
            stdout=self._out.text(),
            stderr=self._err.text(),
            timed_out=self.timed_out,
            duration=time.monotonic() - self.started,
        )
        return self._finished


_devnull_lock = threading.Lock()
_devnull_fd = -1


def _devnull() -> int:
    """A descriptor on /dev/null for children's stdin, opened once (not once per child)."""
    global _devnull_fd
    with _devnull_lock:
        if _devnull_fd < 0:
            _devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        return _devnull_fd


def _feed_what_fits(stdin: IO[bytes], data: bytes) -> bytes:
    """Write what the pipe takes now, without blocking; what is left for a feeder thread.

    A prompt fits in a pipe's buffer (64 KiB on Linux): it is then written here and the pipe
    closed, and the child gets it without a thread started for it (about 0.1 ms of CPU a turn).
    """
    fd = stdin.fileno()
    try:
        os.set_blocking(fd, False)
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    except OSError:  # EPIPE: the child closed its stdin (or exited): nothing more to feed
        written = len(data)
    if written >= len(data):
        with contextlib.suppress(OSError):
            stdin.close()
        return b""
    with contextlib.suppress(OSError):
        os.set_blocking(fd, True)  # the feeder's writes block, so a slow reader gets it all
    return data[written:]


def _feed(stdin: IO[bytes], data: bytes) -> None:
    # The pipe is unbuffered: a write may take only part of the data (a signal, say).
    try:
        view = memoryview(data)
        while view:
            written = stdin.write(view)
            if not written:  # only a non-blocking pipe says so, and this one blocks: never spin
                break
            view = view[written:]
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def start(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    readiness: Readiness,
    timeout: float | None = None,
    stdin_data: bytes | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    capture_bytes: int = DEFAULT_CAPTURE_BYTES,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> Supervised | Completed:
    """Spawn a child under supervision, its pipes and exit in `readiness`; a Completed carrying
    the spawn error when it cannot start. A string is a shell command (`sh -c`), a sequence an argv.

    The caller drives it (`Supervised.advance` after each `readiness.wait`) and must call
    `Supervised.finish` on every path.
    """
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    # The shell by its path, as subprocess's shell=True does: no search of PATH per child.
    executable = _SHELL if isinstance(command, str) else None
    mark = _guard.child_mark()
    started = time.monotonic()
    spawning = _orphans.lock if _orphans.enabled else contextlib.nullcontext()
    try:
        with spawning:
            proc = subprocess.Popen(
                argv,
                executable=executable,
                cwd=cwd,
                env={**env, SUPERVISOR_ENV: mark},
                stdin=subprocess.PIPE if stdin_data is not None else _devnull(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                bufsize=0,  # the pipes are read through their descriptors: no buffer objects
            )
            if _orphans.enabled:
                _orphans.started.add(proc.pid)
    except OSError as exc:
        return Completed(-1, "", "", False, time.monotonic() - started, spawn_error=str(exc))
    pgid = proc.pid
    _guard.register(pgid)
    _running.add(pgid)
    out, err = _TailBuffer(capture_bytes), _TailBuffer(capture_bytes)
    streams = _Streams(proc, _LineSplitter(out, on_stdout_line), _LineSplitter(err, None), readiness)
    child = Supervised(proc, mark, streams, out, err, readiness, started, timeout, grace)
    if stdin_data is not None and proc.stdin is not None:
        rest = _feed_what_fits(proc.stdin, stdin_data)
        if rest:
            # A thread, so a child that never reads its stdin cannot block us past the deadline.
            feeder = threading.Thread(target=_feed, args=(proc.stdin, rest), daemon=True)
            feeder.start()
    return child


def run(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None = None,
    stdin_data: bytes | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    capture_bytes: int = DEFAULT_CAPTURE_BYTES,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> Completed:
    """Run a child under supervision. A string is a shell command (`sh -c`), a sequence an argv."""
    readiness = Readiness()
    child = start(
        command,
        cwd=cwd,
        env=env,
        readiness=readiness,
        timeout=timeout,
        stdin_data=stdin_data,
        on_stdout_line=on_stdout_line,
        capture_bytes=capture_bytes,
        grace=grace,
    )
    if isinstance(child, Completed):
        return child
    try:
        while not child.advance(time.monotonic()):
            wake = child.next_wake()
            readiness.wait(None if wake is None else wake - time.monotonic())
    except BaseException:
        # KeyboardInterrupt, an exception in a line callback: the child's group goes all the same.
        child.finish()
        raise
    return child.finish()


@attrs.define
class Background:
    """A long-lived supervised child (a service): own group, registered with the guard until reaped."""

    proc: subprocess.Popen[bytes]
    mark: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        """The exit code once the child has exited, else None; the child is not reaped here.

        Until `stop` reaps it, its pid, which is also its group's id and is registered with the
        guard, stays its own: were it reaped now, the id could go to another session (a task's)
        before `stop` unregisters it, and an engine dying meanwhile would have the guard kill that."""
        proc = self.proc
        if proc.returncode is not None:
            return proc.returncode
        try:
            found = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return proc.poll()  # reaped by someone else
        if found is None:
            return None
        signalled = found.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        return -found.si_status if signalled else found.si_status

    def stop(self, grace: float) -> tuple[int, bool]:
        """SIGTERM the group, allow `grace` seconds, then SIGKILL; (exit code, whether it was killed)."""
        killed = False
        if not _exited(self.proc):
            _kill_group(self.proc.pid, signal.SIGTERM)
            if not _wait_for_exit(self.proc, grace):
                killed = True
        # The whole group goes either way: the leader may have left helpers behind. Only while
        # the leader is unreaped is the group's id still its own (see `run`); once a poll()
        # reaped it, its marked helpers are found by their mark below.
        if self.proc.returncode is None:
            _kill_group(self.proc.pid, signal.SIGKILL)
        _guard.unregister(self.proc.pid)
        self.proc.wait()
        kill_marked(self.mark)
        return self.proc.returncode, killed


def spawn(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, stdio: bool = False
) -> Background:
    """Start a child that outlives this call (never through a shell); its output appends to `output`.

    stdio: the child speaks a protocol over its standard streams (an MCP stdio server), so
    `proc.stdin` and `proc.stdout` are pipes to it and only its stderr goes to `output`.
    Raises OSError when it cannot be started. The guard kills it if the engine dies.
    """
    mark = _guard.child_mark()
    with open(output, "ab") as sink:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env={**env, SUPERVISOR_ENV: mark},
            stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdio else sink,
            stderr=sink if stdio else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _guard.register(proc.pid)
    return Background(proc, mark)


os.register_at_fork(after_in_child=_after_fork_in_child)
