"""Where a run keeps things (RFC-0001:C-PATHS): all anchored at the manifest directory or CLI flags."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import UsageError
from crucible_core.manifest.containment import DEFAULT_STATE_DIR_NAME, overlap_problem

if TYPE_CHECKING:  # a type only: the broker tools write through this module without the loader
    from crucible_core.manifest.loader import LoadedManifest

PRIVATE_DIR_NAME = "private"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class RunPaths:
    manifest_dir: Path
    workspace: Path
    state_dir: Path
    steer_file: Path

    @classmethod
    def resolve(
        cls, loaded: LoadedManifest, *, state_dir: Path | None = None, steer: Path | None = None
    ) -> RunPaths:
        paths = cls(
            manifest_dir=loaded.dir,
            workspace=loaded.workspace,
            state_dir=(state_dir or loaded.dir / DEFAULT_STATE_DIR_NAME).resolve(),
            # the directory resolved, the name not: a link standing at STEER.md is never followed
            steer_file=_resolve_parent(steer or loaded.dir / "STEER.md"),
        )
        problem = overlap_problem(paths.workspace, paths.state_dir)
        if problem:
            # The loader already keeps [workspace].dir off the default state dir; only --state-dir gets here.
            raise UsageError(f"--state-dir: {problem}", hint="keep the state directory outside the workspace")
        return paths

    @property
    def session_log(self) -> Path:
        return self.state_dir / "session.jsonl"

    @property
    def admissions(self) -> Path:
        return self.state_dir / "admissions.jsonl"

    @property
    def control_file(self) -> Path:
        return self.state_dir / "control.json"

    @functools.cached_property  # asked for several times in every iteration
    def private_dir(self) -> Path:
        return self.state_dir / PRIVATE_DIR_NAME

    @property
    def escalation_file(self) -> Path:
        return self.workspace / "ESCALATION.json"

    @property
    def provisioning_file(self) -> Path:
        return self.workspace / "PROVISIONING_PENDING.json"

    @functools.cached_property  # asked for several times in every iteration
    def distress_dir(self) -> Path:
        # in the state directory, not the workspace: a restore or a snapshot must never touch it
        return self.state_dir / "distress"

    def ensure_state_dirs(self) -> None:
        """The state directory and its parts, private to the user who runs the engine (0700):
        the log, the ledger and the engine's records are nobody else's to read."""
        for directory in (self.state_dir, self.distress_dir, self.private_dir):
            # one stat when all is well (the guard asks after every child the agent or the
            # measure controls); made, or made private again, only when it is not
            try:
                st = os.stat(directory)
            except OSError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700:
                continue
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(directory, 0o700)

    def spared_in_workspace(self) -> tuple[str, ...]:
        """Workspace-relative paths a restore must keep: engine files that live inside it."""
        spared = [
            # the views crucible-plugin-results-md keeps (their names are the agent's too: the
            # prompt points at RESULTS.md); spared whether or not the plugin is installed
            "RESULTS.md",
            "RESULTS-score.svg",
            "ESCALATION.json",
            "PROVISIONING_PENDING.json",
        ]
        for path in (self.state_dir, self.steer_file):
            try:
                rel = path.relative_to(self.workspace).as_posix()
            except ValueError:
                continue
            spared.append(rel + "/" if path == self.state_dir else rel)
        return tuple(spared)


def _resolve_parent(path: Path) -> Path:
    absolute = path.absolute()
    return absolute.parent.resolve() / absolute.name


def write_atomic(path: Path, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Replace a file so a reader (or a crash) sees the old or the new content, never half.

    `durable=False` skips the fsync: right for views (RESULTS.md) and per-turn scratch files
    that are rewritten every iteration and rebuilt on resume; a process kill still cannot
    tear them, only a machine crash could lose the last version.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = _create_new(tmp, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)  # whatever the umask took away; on the file we made, never a link's target
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _create_new(tmp: Path, mode: int) -> int:
    """Open `tmp` as a file this call creates. The name is predictable and its directory may be
    the agent's (RESULTS.md sits in the workspace): whatever stands there, a link planted to
    carry our write to another file included, is removed rather than opened."""
    for _ in range(3):
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        except FileExistsError:
            os.unlink(tmp)  # a link or a file a killed predecessor left; a directory raises here
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
