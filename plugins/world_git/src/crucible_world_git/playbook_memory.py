"""A playbook's git memory: a task's workspace changes become a commit only when it passes.

The git world's WorkspaceMemory (registered as "git"): the playbook lane clones `[repo]` and
keeps its workspace's history through it, and it runs git through the supervisor. The playbook runs its shared-workspace tasks one at a time (isolated ones still
run side by side), so when a task settles nothing else is writing there: its changes are its
own. The deferral below is a guard for an executor that overlaps shared tasks anyway.

Git runs with configuration the engine chose, never what a task left in the workspace. The
repository and the work tree are named explicitly (a `.git` file, a linked `.git` or
`core.worktree` cannot point git elsewhere); system and global config are off; hooks and
fsmonitor are switched off on the command line; and because git always reads its
repository's own `config`, before every call the files git reads from the repository are put
back to the engine's record of them (written when the memory was made, in the state dir), and
a `commondir` (which would move the repository's config, objects and refs elsewhere) is removed.
A task's `git config` (filters, include.path, core.worktree, sshCommand...) and a
`.gitattributes` naming a filter therefore never reach the engine's git.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from crucible_core.api import (
    AgentFileRefused,
    Completed,
    RunFailed,
    WorkspaceError,
    WorkspaceMemoryContext,
    read_regular,
    run_process,
)

GIT_ENV = {
    "PATH": "/usr/bin:/bin:/usr/local/bin",
    "GIT_AUTHOR_NAME": "crucible",
    "GIT_AUTHOR_EMAIL": "crucible@localhost",
    "GIT_COMMITTER_NAME": "crucible",
    "GIT_COMMITTER_EMAIL": "crucible@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",  # refs/replace/ would swap one commit's content for another's
    "GIT_TERMINAL_PROMPT": "0",
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
}
# Set on the command line, so they win over any file git reads.
ENGINE_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.attributesFile=/dev/null",
    "-c", "core.sshCommand=false",
    "-c", "init.templateDir=",
    "-c", "gc.auto=0",  # no gc detached into the background
    "-c", "core.logAllRefUpdates=false",  # no new reflogs (existing ones are checked before each call)
    "-c", "maintenance.auto=false",
)  # fmt: skip
CLONE_TIMEOUT = 600.0
# The repository files git reads on every call that the engine keeps as it recorded them.
RECORDED = ("config", "info/exclude")
BASE = "base"  # the record of the playbook's base commit (the pristine start)
ALTERNATES = ("objects/info/alternates", "objects/info/http-alternates")
MAX_RECORD_BYTES = 1 << 20


class PlaybookMemory:
    def __init__(self, workspace: Path, record: Path, excluded: tuple[str, ...] = ()) -> None:
        self.workspace = workspace
        self.git_dir = workspace / ".git"
        self.record = record  # engine-owned: what RECORDED held when the memory was made, the base
        self.excluded = excluded  # engine files a task leaves behind that belong to no commit
        self.deferred: list[str] = []  # passing tasks whose changes could not be committed alone

    @classmethod
    def from_context(cls, ctx: WorkspaceMemoryContext) -> PlaybookMemory:
        return cls(ctx.workspace, ctx.record_dir, ctx.engine_files)

    def _git(self, *args: str, restore: bool = True) -> Completed:
        if restore:
            self._restore()
        env = {**GIT_ENV, "GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.workspace)}
        return run_process(["git", *ENGINE_CONFIG, *args], cwd=self.workspace, env=env, timeout=120)

    def clone_from(self, source: str, ref: str | None, *, cwd: Path) -> None:
        """Clone `source` into the absent or empty workspace and check out `ref` (detached)."""
        workspace = self.workspace
        if workspace.exists():
            workspace.rmdir()  # empty (checked before): git clones into a directory it makes
        done = _clone_git(["clone", "--quiet", "--no-recurse-submodules", source, str(workspace)], cwd)
        if not done.ok:
            raise WorkspaceError(
                f"git clone {source} {done.describe_failure()}: {done.stderr.strip()[-300:]}"
            )
        if ref is None:
            return
        checkout = _clone_git(["-C", str(workspace), "checkout", "--quiet", "--detach", ref, "--"], cwd)
        if not checkout.ok:
            raise RunFailed(
                f"[repo].ref {ref!r} could not be checked out of {source}: {checkout.stderr.strip()[-300:]}",
                hint="name a branch, tag or commit the repository has",
            )

    def ensure(self) -> None:
        """Make the memory once: the workspace's repository (made here when it has none) and its
        base commit, with the engine's record of the repository files git reads."""
        if self.base_commit() is not None:
            return
        kind = _kind(self.git_dir)
        if kind is not None and not stat.S_ISDIR(kind):
            raise WorkspaceError(
                f"{self.git_dir} is not a directory (a linked worktree, a submodule or a link)",
                hint="a playbook's git memory needs a workspace with a repository of its own",
            )
        made = kind is None
        if made:
            self._git("init", "-q", restore=False)
            _replace(
                self.git_dir / "info" / "exclude", "".join(f"/{name}\n" for name in self.excluded).encode()
            )
        self.record.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in RECORDED:
            _replace(self.record / name, _read(self.git_dir / name) or b"")
        head = self._git("rev-parse", "--verify", "-q", "HEAD^{commit}")
        if made or not head.ok:
            self._git("add", "-A")
            self._git("commit", "-q", "--allow-empty", "-m", "crucible: playbook base")
            head = self._git("rev-parse", "--verify", "-q", "HEAD^{commit}")
        if head.ok:
            _replace(self.record / BASE, head.stdout.strip().encode())

    def _restore(self) -> None:
        """Put back what git reads from the repository on every call, as the engine recorded it."""
        repository = _kind(self.git_dir)
        head = _kind(self.git_dir / "HEAD") if repository is not None and stat.S_ISDIR(repository) else None
        if head is None or not stat.S_ISREG(head):
            raise WorkspaceError(
                f"{self.git_dir} is no longer the playbook's repository (a task replaced it)",
                hint="resume the run (--resume) to rebuild the workspace from the pristine start",
            )
        for name in RECORDED:
            wanted = _read(self.record / name)
            if wanted is None:
                raise WorkspaceError(f"the engine's record of its git memory is missing ({self.record})")
            if _read(self.git_dir / name) != wanted:
                _replace(self.git_dir / name, wanted)
        _remove(self.git_dir / "commondir")
        # Alternates would let git count another repository's objects as this one's.
        for name in ALTERNATES:
            _remove(self.git_dir / name)
        index = _kind(self.git_dir / "index")
        if index is not None and not stat.S_ISREG(index):
            _remove(self.git_dir / "index")  # git makes a new one; a FIFO there would block it
        packed = _kind(self.git_dir / "packed-refs")
        if packed is not None and not stat.S_ISREG(packed):
            _remove(self.git_dir / "packed-refs")
        for tree in ("refs", "logs"):
            _drop_unsafe_entries(self.git_dir / tree)

    def settled(self, task: str, passed: bool, quiescent: bool) -> None:
        if passed:
            self.deferred.append(task)
        if not quiescent:
            return
        if passed or self.deferred:
            # Everything uncommitted belongs to passing tasks (or, when a failure overlapped a
            # deferred pass, cannot be told apart from theirs: passing work is never thrown away).
            names = ", ".join(self.deferred)
            self._git("add", "-A")
            if not self._git("diff", "--cached", "--quiet").ok:
                self._git("commit", "-q", "-m", f"crucible: task {names}")
            self.deferred.clear()
            return
        # A task that did not pass contributes nothing: its undeclared changes are discarded.
        self._git("reset", "-q", "--hard", "HEAD")
        self._git("clean", "-fdq", *(f"-e{name}" for name in self.excluded))

    def base_commit(self) -> str | None:
        """The playbook's base commit (the pristine start), as the engine recorded it; None before."""
        data = _read(self.record / BASE)
        text = data.decode("ascii", errors="replace").strip() if data else ""
        return text if len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text) else None

    def reset_to_base(self) -> bool:
        """Put the workspace back to the playbook's base commit; False (and the record forgotten)
        when there is none or the repository cannot be trusted to hold it."""
        base = self.base_commit()
        try:
            done = (
                base is not None
                and self._git("reset", "-q", "--hard", base).ok
                and self._git("clean", "-fdqx").ok
            )
        except WorkspaceError:
            done = False
        if not done:
            shutil.rmtree(self.record, ignore_errors=True)
        return done


def _clone_git(args: list[str], cwd: Path) -> Completed:
    # No system or global config, hooks or fsmonitor; HOME stays unset so ssh finds its keys.
    env = {key: value for key, value in GIT_ENV.items() if key not in ("HOME", "XDG_CONFIG_HOME")}
    return run_process(["git", *ENGINE_CONFIG, *args], cwd=cwd, env=env, timeout=CLONE_TIMEOUT)


def _read(path: Path) -> bytes | None:
    """A recorded (or recordable) file's bytes; None when absent or not a plain, small file."""
    try:
        return read_regular(path, MAX_RECORD_BYTES)
    except (FileNotFoundError, NotADirectoryError, AgentFileRefused):
        return None


def _drop_unsafe_entries(root: Path) -> None:
    """Remove what git would block on or write through under refs/ or logs/: FIFOs, sockets,
    devices, symbolic links, and (for reflogs, which git appends to in place) hard-linked files.

    git writes a ref by renaming a new file over it, but appends a reflog line to the file that
    is there: a hard link at .git/logs/HEAD would carry the engine's line into a file elsewhere.
    """
    kind = _kind(root)
    if kind is None:
        return
    if not stat.S_ISDIR(kind):
        _remove(root)
        return
    for current, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(current) / name
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                os.unlink(path)


def _kind(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def _remove(path: Path) -> None:
    if not os.path.lexists(path):
        return
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _replace(path: Path, data: bytes) -> None:
    """Write `path` whole, through no link: a link, FIFO or directory in its place is removed first."""
    parent = path.parent
    if os.path.lexists(parent) and not (parent.is_dir() and not parent.is_symlink()):
        _remove(parent)
    parent.mkdir(parents=True, exist_ok=True)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    temp = parent / f".crucible-{os.getpid()}.tmp"
    _remove(temp)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temp, path)
