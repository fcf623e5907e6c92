"""Terminal requests from the agent (terminal/create, output, wait_for_exit, kill, release).

A terminal is a command the client runs for the agent, in a directory inside the workspace.
With arguments it is started as that program with them; without, it is a command line and
runs under `sh -c`, as the protocol's reference client runs it (agents send `ls -la | head`
as one string). Each runs in
a process group of its own so kill and release reach everything it started; the turn's
supervisor mark is in its environment, so the engine's sweep reaches it too when the turn ends.
Output is kept up to a byte limit, dropping the oldest bytes first, as the protocol asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attrs

# The most output kept per terminal, whatever the agent asks for.
MAX_OUTPUT_BYTES = 1 << 20
# Terminals alive at once; a request past this is refused until the agent releases one.
MAX_LIVE = 16


class TerminalRefused(Exception):
    """The terminal cannot be created or found; the message says why."""


@attrs.define
class Terminal:
    """One started command. Its leader is reaped only when the terminal is released or closed:
    until then its pid, which is also its group's id, stays taken, so killing the group by that
    id cannot reach a stranger's group (asyncio's child watcher reaps at exit, which opened
    exactly that window, and left the leader's background jobs running after it exited)."""

    proc: subprocess.Popen[bytes]
    limit: int
    output: bytearray = attrs.field(factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None
    code: int | None = None  # the leader's exit status, read without reaping it
    reaped: bool = False

    async def pump(self) -> None:
        assert self.proc.stdout is not None
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader(limit=65536)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), self.proc.stdout
        )
        try:
            while chunk := await stream.read(65536):
                self.output += chunk
                if len(self.output) > self.limit:
                    del self.output[: len(self.output) - self.limit]
                    self.truncated = True
        finally:
            transport.close()

    def text(self) -> str:
        # Dropping from the front may split a character: decode leniently.
        return self.output.decode("utf-8", errors="replace")

    def exited(self) -> bool:
        """Whether the leader has exited (its status is kept in `code`); it is not reaped here."""
        if self.code is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped by someone else: nothing to report but a failure
            self.code, self.reaped = -1, True
            return True
        if info is None:
            return False
        status = info.si_status
        self.code = -status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else status
        return True

    def exit_code(self) -> int | None:
        """The leader's exit status once it has exited (negative: the signal), else None."""
        return self.code if self.exited() else None

    async def wait_exit(self) -> int:
        """The leader's exit status, awaited (a pidfd wakes the loop, else a short poll)."""
        if self.exited():
            assert self.code is not None
            return self.code
        loop = asyncio.get_running_loop()
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(self.proc.pid)
        try:
            while not self.exited():
                if pidfd is None:
                    await asyncio.sleep(0.01)
                    continue
                ready = loop.create_future()
                loop.add_reader(pidfd, _wake, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(pidfd)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        assert self.code is not None
        return self.code

    def kill(self) -> None:
        """SIGKILL the terminal's whole group; the leader stays unreaped (see the class)."""
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def reap(self) -> None:
        """Kill the group, then reap the leader: from here on its id may belong to anyone."""
        if self.reaped:
            return
        self.kill()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.proc.pid, 0)  # killed or exited: this returns at once
        self.proc.returncode = self.code if self.code is not None else -signal.SIGKILL
        self.reaped = True


@attrs.define
class Terminals:
    env: Mapping[str, str]
    live: dict[str, Terminal] = attrs.field(factory=dict)
    _count: int = 0

    async def create(
        self, command: str, args: list[str], env: Mapping[str, str], cwd: Path, limit: int | None
    ) -> str:
        if len(self.live) >= MAX_LIVE:
            raise TerminalRefused(f"{MAX_LIVE} terminals are open: release one first")
        argv = [command, *args] if args else ["/bin/sh", "-c", command]
        try:
            # subprocess, not asyncio's: asyncio's child watcher would reap the leader the
            # moment it exits, and the group could then no longer be killed safely by its id.
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**self.env, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise TerminalRefused(f"cannot start {command}: {exc.strerror or exc}") from None
        self._count += 1
        terminal_id = f"term-{self._count}"
        bound = MAX_OUTPUT_BYTES if limit is None else max(0, min(limit, MAX_OUTPUT_BYTES))
        terminal = Terminal(proc, bound)
        terminal.reader = asyncio.get_running_loop().create_task(terminal.pump())
        self.live[terminal_id] = terminal
        return terminal_id

    def get(self, terminal_id: str) -> Terminal:
        terminal = self.live.get(terminal_id)
        if terminal is None:
            raise TerminalRefused(f"no terminal {terminal_id!r}")
        return terminal

    async def wait(self, terminal_id: str) -> int:
        terminal = self.get(terminal_id)
        code = await terminal.wait_exit()
        if terminal.reader is not None:
            await terminal.reader
        return code

    def release(self, terminal_id: str) -> None:
        terminal = self.get(terminal_id)
        terminal.kill()
        self.live.pop(terminal_id, None)
        _reap_soon(terminal)

    async def close(self) -> None:
        for terminal in self.live.values():
            terminal.kill()
        for terminal in self.live.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(terminal.wait_exit(), 5)
            terminal.reap()
            if terminal.reader is not None:
                terminal.reader.cancel()
                with contextlib.suppress(BaseException):
                    await terminal.reader
        self.live.clear()


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _reap_soon(terminal: Terminal) -> None:
    """Reap a released terminal once its killed leader has exited (at once, almost always)."""

    async def reap() -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(terminal.wait_exit(), 5)
        terminal.reap()
        if terminal.reader is not None:
            terminal.reader.cancel()

    try:
        asyncio.get_running_loop().create_task(reap())
    except RuntimeError:  # no loop running: the leader was SIGKILLed, reaping blocks briefly
        terminal.reap()


def exit_status(code: int) -> tuple[int | None, str | None]:
    """An exit code as ACP's (exitCode, signal) pair: a negative code is a signal."""
    if code >= 0:
        return code, None
    try:
        return None, signal.Signals(-code).name
    except ValueError:
        return None, str(-code)
