"""Declared file outputs (RFC-0002:C-TASK-FILES): confined capture, atomic publication, staging.

A task's `emits_files` are captured from the root it ran in into the state dir (one directory
per producing task, published by rename), and staged read-only into each consumer's root
under `.crucible/inputs/<consumer>/<producer>/` before the consumer is dispatched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from crucible_core.agent_files import AgentFileRefused, read_regular

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_ENV = "CRUCIBLE_PLAN_FILES_MAX_BYTES"
INPUTS_DIR = Path(".crucible") / "inputs"
# The store's directory under the state dir: one published set per producing task.
FILES_DIR_NAME = "files"
# Written last into a published set: the set is whole. The engine's, never one of the task's files.
COMPLETE_MARKER = ".complete"


def max_total_bytes(environ: dict[str, str] | None = None) -> int:
    raw = (environ if environ is not None else os.environ).get(MAX_BYTES_ENV, "")
    return int(raw) if raw.isdigit() else DEFAULT_MAX_BYTES


class CaptureRefused(Exception):
    """A declared path could not be captured; the message says which and why."""


def read_confined(root: Path, rel: str, max_bytes: int) -> bytes:
    """A declared file's bytes (at most `max_bytes`), refusing links of any kind and anything that is not a regular file.

    Each component is checked with lstat (no symbolic link anywhere on the path), and the file
    is opened without following links or blocking (a FIFO) and checked to have a single link:
    a hard link to a file outside the workspace cannot be told apart by resolving names.
    """
    current = root
    parts = rel.split("/")
    for part in parts[:-1]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise CaptureRefused(f"{rel}: absent") from None
        if not stat.S_ISDIR(info.st_mode):
            raise CaptureRefused(f"{rel}: {part} is a link or not a directory")
    try:
        return read_regular(current / parts[-1], max_bytes, single_link=True)
    except FileNotFoundError:
        raise CaptureRefused(f"{rel}: absent") from None
    except AgentFileRefused as exc:
        raise CaptureRefused(f"{rel}: {exc}") from None


def fingerprint(root: Path, paths: Iterable[str], max_bytes: int) -> dict[str, str | None]:
    """What each declared path held before an attempt: the failing-capture provenance check."""
    prints: dict[str, str | None] = {}
    for rel in paths:
        try:
            prints[rel] = hashlib.sha256(read_confined(root, rel, max_bytes)).hexdigest()
        except CaptureRefused:
            prints[rel] = None
    return prints


class FileStore:
    """Published file sets, one directory per producing task, under the plan's state dir."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes  # the directory is made by the first capture (publish)
        # Tasks finishing together publish at once: the size check, the staging directory and
        # its rename are one step, so no capture walks another's half-written staging directory
        # and the cap holds for their sum.
        self._publishing = threading.Lock()

    def set_dir(self, task: str) -> Path:
        return self.directory / task

    def has(self, task: str) -> bool:
        return (self.set_dir(task) / COMPLETE_MARKER).exists()

    def used_bytes(self) -> int:
        total = 0
        for path in self.directory.rglob("*"):
            if path.name == COMPLETE_MARKER or path.relative_to(self.directory).parts[0].startswith(".tmp-"):
                continue  # a staging directory a killed run left is not a captured set
            with contextlib.suppress(FileNotFoundError):  # a set removed meanwhile (a retry's)
                st = path.lstat()
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
        return total

    def captured(self, task: str) -> list[tuple[str, Path]]:
        """A complete set's files as (declared path, stored copy), in path order; the marker is not one."""
        root = self.set_dir(task)
        if not self.has(task):
            return []
        return [
            (path.relative_to(root).as_posix(), path)
            for path in sorted(root.rglob("*"))
            if path != root / COMPLETE_MARKER and path.is_file() and not path.is_symlink()
        ]

    def remove(self, task: str) -> None:
        shutil.rmtree(self.set_dir(task), ignore_errors=True)

    def publish(
        self, task: str, root: Path, paths: Iterable[str], before: dict[str, str | None] | None
    ) -> None:
        """Capture every path or none. `before` (failing attempts) keeps only what this attempt wrote."""
        with self._publishing:  # a walk of the store (used_bytes) must not see a set vanish
            self.remove(task)
        contents: dict[str, bytes] = {}
        for rel in paths:
            data = read_confined(root, rel, self.max_bytes)
            if before is not None and before.get(rel) == hashlib.sha256(data).hexdigest():
                raise CaptureRefused(f"{rel}: not written by this attempt")
            contents[rel] = data
        size = sum(len(data) for data in contents.values())
        with self._publishing:
            if self.used_bytes() + size > self.max_bytes:
                raise CaptureRefused(
                    f"the run's captured files would exceed {self.max_bytes} bytes ({MAX_BYTES_ENV})"
                )
            staging = self.directory / f".tmp-{uuid.uuid4().hex}"
            for rel, data in contents.items():
                out = staging / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
            staging.mkdir(parents=True, exist_ok=True)
            (staging / COMPLETE_MARKER).write_text("ok\n")
            os.replace(staging, self.set_dir(task))

    def stage(self, producers: Iterable[str], root: Path, consumer: str) -> tuple[Path, list[str]]:
        """Copy each producer's complete set read-only into the consumer's root; return what was staged."""
        target = root / INPUTS_DIR / consumer
        unstage(target)
        staged: list[str] = []
        for producer in producers:
            if not self.has(producer):
                continue
            source = self.set_dir(producer)
            shutil.copytree(source, target / producer, ignore=_marker_of(source))
            staged.append(producer)
        for path in sorted(target.rglob("*"), reverse=True) if target.exists() else ():
            path.chmod(0o555 if path.is_dir() else 0o444)
        return target, staged


def _marker_of(root: Path) -> Callable[[str, list[str]], list[str]]:
    """copytree's ignore: the set's own marker, not a declared file that happens to share its name."""
    return lambda directory, names: [COMPLETE_MARKER] if Path(directory) == root else []


def unstage(target: Path) -> None:
    if not target.exists():
        return
    for path in target.rglob("*"):
        if path.is_dir():
            path.chmod(0o755)
    target.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)
