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
    proc: asyncio.subprocess.Process
    limit: int
    output: bytearray = attrs.field(factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    async def pump(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(65536):
            self.output += chunk
            if len(self.output) > self.limit:
                del self.output[: len(self.output) - self.limit]
                self.truncated = True

    def text(self) -> str:
        # Dropping from the front may split a character: decode leniently.
        return self.output.decode("utf-8", errors="replace")

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)


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
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env={**self.env, **env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
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
        code = await terminal.proc.wait()
        if terminal.reader is not None:
            await terminal.reader
        return code

    def release(self, terminal_id: str) -> None:
        self.get(terminal_id).kill()
        self.live.pop(terminal_id, None)

    async def close(self) -> None:
        for terminal in self.live.values():
            terminal.kill()
        for terminal in self.live.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(terminal.proc.wait(), 5)
        self.live.clear()


def exit_status(code: int) -> tuple[int | None, str | None]:
    """An exit code as ACP's (exitCode, signal) pair: a negative code is a signal."""
    if code >= 0:
        return code, None
    try:
        return None, signal.Signals(-code).name
    except ValueError:
        return None, str(-code)
