"""The workspace repository as the engine opens it: dulwich answering from the engine's configuration, never the repository's.

A workspace's `.git/config` is the agent's to write, and the system's and the user's
configuration are not the run's to depend on: an include there, a filter driver,
`core.worktree`, `core.excludesFile` or `core.ignoreCase` would run a command inside the engine,
read a file it chose, or change what is kept. EngineRepo answers every configuration question
from `ENGINE_CONFIG`, so dulwich opens no configuration file at all; the file is read once, at
setup and bounded, only to refuse a repository format the world cannot write (`format_problem`).
Reflog lines go through head_ref's append, which never writes through a link.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from dulwich.config import ConfigFile, StackedConfig
from dulwich.object_store import DiskObjectStore
from dulwich.repo import BASE_DIRECTORIES, CONTROLDIR, OBJECTDIR, Repo

from crucible_core.api import AgentFileRefused, read_regular
from crucible_world_git import head_ref
from crucible_world_git.loose_objects import write_all

IDENTITY = b"crucible <crucible@localhost>"
ENGINE_CONFIG = (
    (b"repositoryformatversion", b"0"),
    (b"bare", b"false"),
    (b"filemode", b"true"),
    (b"logallrefupdates", b"true"),
)
# A config file is a few hundred bytes; one larger than this is read no further than this.
MAX_CONFIG_BYTES = 1 << 20


def engine_config() -> ConfigFile:
    """The configuration every engine question about a workspace repository is answered from."""
    config = ConfigFile()
    for key, value in ENGINE_CONFIG:
        config.set((b"core",), key, value)
    return config


class EngineRepo(Repo):
    """A dulwich Repo whose configuration is the engine's (see the module docstring)."""

    def get_config(self) -> ConfigFile:
        return engine_config()

    def get_worktree_config(self) -> ConfigFile:
        return engine_config()

    def get_config_stack(self) -> StackedConfig:
        return StackedConfig([engine_config()])

    def _write_reflog(
        self,
        ref: bytes,
        old_sha: bytes,
        new_sha: bytes,
        committer: bytes | None,
        timestamp: int | None,
        timezone: int | None,
        message: bytes,
    ) -> None:
        # dulwich appends with open(path, "ab"), which writes through a link the agent planted.
        gitdir = self.controldir() if ref == b"HEAD" else self.commondir()
        line = head_ref.log_line(old_sha, new_sha, committer or IDENTITY, message)
        head_ref.append_log(Path(gitdir), os.fsdecode(ref), line)


def open_repo(path: Path | str) -> EngineRepo:
    """The repository at `path` (raises dulwich's NotGitRepository when there is none)."""
    return EngineRepo(os.fspath(path))


def init_repo(path: Path | str) -> EngineRepo:
    """A new repository at `path`, made without reading any configuration (its branch is master).

    The same files dulwich's `Repo.init` writes, written plainly: dulwich writes each through
    GitFile, which fsyncs it, and those five fsyncs were most of a run's start-up on a busy
    disk. `git init` does not fsync either. Nothing is lost to a crash here: a repository
    half made is one whose run never started, and setup makes it again.
    """
    root = os.fspath(path)
    controldir = os.path.join(root, CONTROLDIR)
    os.mkdir(controldir)
    for parts in BASE_DIRECTORIES:
        os.mkdir(os.path.join(controldir, *parts))
    DiskObjectStore.init(os.path.join(controldir, OBJECTDIR)).close()
    _write_new(os.path.join(controldir, "HEAD"), b"ref: refs/heads/master\n")
    repo = EngineRepo(root)
    config = ConfigFile()
    config.set("core", "repositoryformatversion", "0")
    config.set("core", "filemode", repo._determine_file_mode())
    if not repo._determine_symlinks():
        config.set("core", "symlinks", False)
    config.set("core", "bare", False)
    config.set("core", "logallrefupdates", True)
    text = io.BytesIO()
    config.write_to_file(text)
    _write_new(os.path.join(controldir, "description"), b"Unnamed repository")
    _write_new(os.path.join(controldir, "config"), text.getvalue())
    _write_new(os.path.join(controldir, "info", "exclude"), b"")
    return repo


def _write_new(path: str, data: bytes) -> None:
    """Create the file at `path` in a directory just made, holding `data` (no fsync: see init_repo)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def _extensions(text: bytes) -> dict[bytes, bytes]:
    """The `[extensions]` keys of a git config file (names lower-cased), read without includes."""
    found: dict[bytes, bytes] = {}
    section = b""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(b"["):
            header, _, line = line[1:].partition(b"]")
            section = header.strip().lower()
            line = line.strip()
        line = line.split(b"#", 1)[0].split(b";", 1)[0].strip()
        if section == b"extensions" and line:
            key, _, value = line.partition(b"=")
            found[key.strip().lower()] = value.strip().strip(b'"').lower() or b"true"
    return found


def format_problem(config: bytes) -> str | None:
    """Why a repository with this config file is one the world cannot write (sha256, reftable), or None."""
    extensions = _extensions(config)
    object_format = extensions.get(b"objectformat", b"sha1")
    if object_format != b"sha1":
        return f"uses {object_format.decode('ascii', 'replace')} object ids; crucible supports sha1"
    if extensions.get(b"refstorage", b"files") != b"files":
        return "keeps its refs in a reftable; crucible supports the files ref storage"
    return None


def config_problem(path: Path) -> str | None:
    """format_problem of the config file at `path`, read bounded and never from a FIFO or through a link."""
    try:
        return format_problem(read_regular(path, MAX_CONFIG_BYTES))
    except (FileNotFoundError, AgentFileRefused):
        return None  # no usable file: the engine's own configuration is all there is


def replace_file(path: Path, data: bytes) -> None:
    """Put `data` at `path` in a directory the agent can write: a fresh file renamed over whatever stood there.

    The temporary file is made with O_EXCL | O_NOFOLLOW, so a link planted at its name is
    never written through either.
    """
    tmp = path.with_name(f".{path.name}.crucible-tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
