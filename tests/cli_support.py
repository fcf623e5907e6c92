"""Helpers for driving the real `crucible` CLI from tests: in this process by default, or as the
installed console script where a separate process is what the test is about."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import click.testing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CRUCIBLE = Path(sys.executable).parent / "crucible"

# Variables that change what the interpreter imports: only a fresh process can honour them.
_IMPORT_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE")


def crucible_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
    env.update(extra)
    return env


def run_crucible(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    real_process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`crucible ARGS` with its exit code and what it printed.

    Runs `crucible_core.cli.main.main` in this process (starting the console script imports the
    CLI and every plugin again, which is most of a short command's time), in `cwd` with `env` as
    the whole environment, both restored afterwards, and with file descriptors 1 and 2 captured
    so what the CLI's children print is caught as a separate process's would be. A real process
    is started when the caller asks for one (`real_process=True`: signals, kill and resume, a
    bridge between processes, the console script itself), when `env` changes what Python imports
    (PYTHONPATH and kin), or off the main thread (the environment, the working directory and
    signal handlers belong to the whole process). In-process, `timeout` is pytest-timeout's job.
    """
    argv = [str(a) for a in args]
    env = env or crucible_env()
    if real_process or _changes_imports(env) or threading.current_thread() is not threading.main_thread():
        return subprocess.run(
            [str(CRUCIBLE), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    return _run_in_process(argv, cwd, env)


def _changes_imports(env: dict[str, str]) -> bool:
    return any(env.get(name) != os.environ.get(name) for name in _IMPORT_VARIABLES)


def _run_in_process(
    argv: list[str], cwd: Path | None, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    from crucible_core.cli.main import main

    code: int
    with _process_state_kept(), _environment(env), _working_directory(cwd), _captured_output() as output:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
    return subprocess.CompletedProcess([str(CRUCIBLE), *argv], code, output.stdout, output.stderr)


def _exit_status(code: object) -> int:
    # As the interpreter turns SystemExit into a status: None is 0, an int itself, anything else
    # is printed to stderr and is 1.
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _working_directory(cwd: Path | None) -> Iterator[None]:
    saved = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


class _Output:
    stdout = ""
    stderr = ""


@contextlib.contextmanager
def _captured_output() -> Iterator[_Output]:
    """Descriptors 1 and 2, and sys.stdout and sys.stderr over them, point at temporary files for
    the call; stdin reads nothing, as under `subprocess.run(capture_output=True)` in a test."""
    output = _Output()
    streams = sys.stdin, sys.stdout, sys.stderr
    for stream in streams[1:]:
        stream.flush()
    saved = os.dup(1), os.dup(2)
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        open(os.devnull, "rb") as nothing,
        open(1, "wb", buffering=0, closefd=False) as fd1,
        open(2, "wb", buffering=0, closefd=False) as fd2,
    ):
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # A console script's streams on pipes: UTF-8 text, stderr escaping what it cannot encode.
        sys.stdin = io.TextIOWrapper(nothing, encoding="utf-8")
        sys.stdout = io.TextIOWrapper(fd1, encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(fd2, encoding="utf-8", errors="backslashreplace", write_through=True)
        try:
            yield output
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            out.seek(0)
            err.seek(0)
            output.stdout = out.read().decode("utf-8", errors="replace")
            output.stderr = err.read().decode("utf-8", errors="replace")


_SIGNALS = sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """A command called in-process must leave its host as it found it: the signal handlers and the
    root logger it changed are put back, and the call fails naming them (a real process would hide
    such a leak by exiting; an embedding caller, or the next test, would not)."""
    handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    leaks: list[str] = []
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                leaks.append(f"the handler of {signal.Signals(sig).name}")
                signal.signal(sig, handler)
        if root.handlers != root_handlers or root.level != root_level:
            leaks.append("the root logger")
            root.handlers[:] = root_handlers
            root.setLevel(root_level)
    assert not leaks, f"the command left {', '.join(leaks)} changed in the calling process"


def crucible_in_process(*args: str | Path) -> click.testing.Result:
    """The real `crucible` command group run in this process (click's CliRunner captures what it
    prints): for tests where a separate process is not what is being tested."""
    from crucible_core.cli.main import cli

    return click.testing.CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
