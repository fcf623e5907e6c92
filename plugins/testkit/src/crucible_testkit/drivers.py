"""Drivers for tests: a World keeping its states in memory, a Judge and an agent Backend that follow a script.

They obey the same Protocols as the real drivers, so the real loop runs them unchanged: the
workspace is a real directory (the agent's edits and the judge's reads happen there), only the
kept states live in a dict. Nothing here starts a process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from crucible_core.api import (
    AgentFileRefused,
    ApplyOutcome,
    CrucibleError,
    FailureClass,
    Reading,
    RunFailed,
    Staged,
    Turn,
    TurnResult,
    WorldContext,
    read_regular,
)

# One file of a state: its permission bits and its bytes.
FileState = tuple[int, bytes]
Files = dict[str, FileState]
# What a test hands the kit: text or bytes per workspace-relative path (None deletes, in a turn).
Content = str | bytes
MAX_FILE_BYTES = 16 * 1024 * 1024  # a file the memory world keeps; far above any test's


class _NotRegular(Exception):
    """The workspace holds something other than regular files and directories."""


def _as_bytes(content: Content) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _inside(rel: str) -> str:
    """`rel` as a clean workspace-relative POSIX path; RunFailed when it leads elsewhere."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or rel.startswith("/"):
        raise RunFailed(
            f"{rel!r} is not a path inside the workspace", hint="give a relative path without '..'"
        )
    return "/".join(parts)


def token_of(files: Files) -> str:
    """Content-addressed: two states with the same files have the same token."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        mode, data = files[rel]
        digest.update(f"{rel}\0{mode:o}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


@attrs.define
class MemoryWorld:
    """A World whose kept states are snapshots of the workspace's files held in a dict.

    `states` may be shared between worlds (the kit shares it per test), so a world built again
    for a resume can restore what an earlier one kept. Only regular files and directories are
    kept: a link or a FIFO in the workspace makes the candidate refused, never followed.
    Paths the context spares are neither kept nor removed.
    """

    workspace: Path
    spared: tuple[str, ...] = ()
    seed: Mapping[str, Content] = attrs.field(factory=dict)
    states: dict[str, Files] = attrs.field(factory=dict)
    current: str | None = None  # the last state kept or restored

    @classmethod
    def from_context(
        cls,
        ctx: WorldContext,
        seed: Mapping[str, Content] | None = None,
        states: dict[str, Files] | None = None,
    ) -> MemoryWorld:
        return cls(ctx.workspace, ctx.spared, dict(seed or {}), states if states is not None else {})

    # -- World --------------------------------------------------------------------------------
    def clone_from(self, source: str, ref: str | None) -> None:
        """Clones nothing: the workspace starts from the seed files (written by prepare)."""
        self.workspace.mkdir(parents=True, exist_ok=True)

    def prepare(self) -> str:
        """Write the seed files over what setup made, and keep that as the base state."""
        self.workspace.mkdir(parents=True, exist_ok=True)
        for rel, content in self.seed.items():
            self._write_file(_inside(rel), (0o644, _as_bytes(content)))
        return self.snapshot("base")

    def recover(self) -> None:
        return None  # nothing on disk can be half-done: the states live in memory

    def snapshot(self, label: str) -> str:
        try:
            files = self._read()
        except _NotRegular as exc:
            raise RunFailed(f"the memory world cannot keep {exc}", hint="keep only regular files") from None
        self.current = self._remember(files)
        return self.current

    def restore(self, token: str) -> None:
        files = self.states.get(token)
        if files is None:
            raise RunFailed(
                f"the memory world never kept a state {token!r}", hint="restore a token it returned"
            )
        self._replace_with(files)
        self.current = token

    def apply(self) -> ApplyOutcome:
        return ApplyOutcome(ok=True)

    def stage(self) -> Staged:
        try:
            files = self._read()
        except _NotRegular as exc:
            return Staged(token="", unchanged=False, refused=f"the workspace holds {exc}")
        token = self._remember(files)
        return Staged(token=token, unchanged=token == self.current)

    def put_back_staged(self, token: str) -> None:
        files = self.states.get(token)
        if files is None:
            raise RunFailed(
                f"the memory world never staged {token!r}", hint="put back a token stage() returned"
            )
        self._replace_with(files)  # the files only: staging keeps nothing

    def last_commit_sha(self) -> str | None:
        return None  # no commits: kept_shas stays empty

    def changed_paths(self) -> list[str]:
        kept = self.states.get(self.current or "", {})
        try:
            files = self._read()
        except _NotRegular as exc:
            return [str(exc)]
        return sorted(rel for rel in files.keys() | kept.keys() if files.get(rel) != kept.get(rel))

    def change(self, head: str, base: str | None = None) -> str:
        raise CrucibleError("the memory world shows no diffs", hint="read its states in the test instead")

    # -- the files ----------------------------------------------------------------------------
    def _remember(self, files: Files) -> str:
        token = token_of(files)
        self.states[token] = files
        return token

    def _spared(self, rel: str) -> bool:
        return any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in self.spared)

    def _read(self) -> Files:
        """The workspace's regular files, never through a link (a link raises _NotRegular)."""
        files: Files = {}
        for top, dirs, names in os.walk(self.workspace, followlinks=False):
            base = Path(top)
            for name in [*dirs, *names]:
                path = base / name
                rel = path.relative_to(self.workspace).as_posix()
                if self._spared(rel):
                    if name in dirs:
                        dirs.remove(name)
                    continue
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode):
                    continue
                if not stat.S_ISREG(mode):
                    raise _NotRegular(f"{rel!r}, which is not a regular file")
                try:
                    files[rel] = (stat.S_IMODE(mode), read_regular(path, MAX_FILE_BYTES))
                except AgentFileRefused as exc:
                    raise _NotRegular(f"{rel!r} ({exc})") from None
        return files

    def _replace_with(self, files: Files) -> None:
        """Remove every entry that is not spared (links unlinked, never followed), then write `files`."""
        for entry in sorted(self.workspace.iterdir()) if self.workspace.is_dir() else ():
            self._remove(entry)
        for rel, state in files.items():
            self._write_file(rel, state)

    def _remove(self, path: Path) -> None:
        rel = path.relative_to(self.workspace).as_posix()
        if self._spared(rel):
            return
        if path.is_symlink() or not path.is_dir():
            path.unlink()
            return
        if any(s.startswith(rel + "/") for s in self.spared):  # a spared path lies below it
            for child in sorted(path.iterdir()):
                self._remove(child)
            return
        shutil.rmtree(path)

    def _write_file(self, rel: str, state: FileState) -> None:
        target = self.workspace / rel
        for parent in reversed(target.relative_to(self.workspace).parents[:-1]):
            folder = self.workspace / parent
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()  # never write through what stands where a directory belongs
            folder.mkdir(exist_ok=True)
        if target.is_symlink():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        target.write_bytes(state[1])
        target.chmod(state[0])


# A scripted score: a number, a whole Reading, or a function of the workspace giving either.
Score = float | Reading | Callable[[Path], float | Reading]


@attrs.define
class ScriptedJudge:
    """A Judge that returns the scores it is given, one per measure (the baseline's first).

    Each entry is a number, a Reading (to script an invalid or solved reading), or a function of
    the workspace returning either. Once the script is spent every measure reads invalid.
    """

    workspace: Path
    scores: Sequence[Score]
    gate: str = "scripted score"
    scored: bool = True
    measured: int = 0

    def measure(self, ctx: object) -> Reading:
        if self.measured >= len(self.scores):
            self.measured += 1
            return Reading.invalid(f"the script has no score for measure {self.measured}")
        entry = self.scores[self.measured]
        self.measured += 1
        value = entry(self.workspace) if callable(entry) else entry
        if isinstance(value, Reading):
            return value
        return Reading(valid=True, score=float(value), note=f"scripted {float(value):g}")


# A scripted turn: the files to write (None deletes one), or a function of the Turn doing its own
# edits and returning its TurnResult (None: a successful turn).
Step = Mapping[str, Content | None] | Callable[[Turn], TurnResult | None]


@attrs.define
class ScriptedBackend:
    """An agent Backend whose turn for iteration i applies the script's entry i-1.

    An iteration beyond the script is a failed turn (`FailureClass.AGENT`), so the loop discards it.
    """

    turns: Sequence[Step]
    taken: list[int] = attrs.field(factory=list)  # the iterations whose turn ran

    def run_turn(self, turn: Turn) -> TurnResult:
        self.taken.append(turn.iteration)
        if not 0 < turn.iteration <= len(self.turns):
            return TurnResult(
                ok=False, failure=FailureClass.AGENT, note=f"the script has no turn {turn.iteration}"
            )
        step = self.turns[turn.iteration - 1]
        if callable(step):
            return step(turn) or TurnResult(ok=True, note=f"scripted turn {turn.iteration}")
        for rel, content in step.items():
            target = turn.workspace / _inside(rel)
            if content is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            target.write_bytes(_as_bytes(content))
        return TurnResult(ok=True, note=f"scripted turn {turn.iteration}: {len(step)} file(s)")
