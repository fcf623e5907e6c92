"""The git CLI run with configuration the engine chose: a git directory of its own, an environment built from nothing.

git reads configuration from the system, the user's home and the repository itself (and
whatever those include), attributes from `.gitattributes` and `info/attributes`, and from them
runs filter drivers, hooks, an fsmonitor, an ssh command or a credential helper, or moves its
work tree elsewhere (`core.worktree`). In a workspace all of that is the agent's to write. So an
engine git call never lets git find a repository by itself: it names a git directory the engine
made (`make_git_dir`: the engine's config, attributes that convert and filter nothing, no
hooks) and runs with `environment()`: no system or global configuration, no system attributes,
nothing inherited from the engine's own environment (a GIT_DIR or GIT_CONFIG_* there, or a
secret). Objects may come from elsewhere through alternates: they are data, never configuration.

Every engine git call goes through this: the git world's forks and the playbook's git memory,
and the github publisher (crucible-plugin-publish-github) for its push.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# Every key here is either a default made explicit or a door closed: no hooks, no fsmonitor, no
# user attributes or excludes file, no line-ending conversion, no background maintenance.
CONFIG = """\
[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tlogAllRefUpdates = false
\thooksPath = /dev/null
\tfsmonitor = false
\tattributesFile = /dev/null
\texcludesFile = /dev/null
\tautocrlf = false
\tquotePath = false
\tuntrackedCache = false
[gc]
\tauto = 0
[maintenance]
\tauto = false
[advice]
\tdetachedHead = false
"""
# info/attributes outranks every .gitattributes: whatever the tree says, nothing is converted
# (text, eol, ident, working-tree-encoding) and no filter driver is named.
ATTRIBUTES = "* -text -crlf !eol !filter -ident !working-tree-encoding\n"
IDENTITY = ("crucible", "crucible@localhost")


def make_git_dir(
    path: Path, *, head: str | None = None, exclude: bytes = b"", alternates: Sequence[Path] = ()
) -> Path:
    """A new git directory at `path` (mode 0700) holding only what the engine wrote.

    `head` is the commit HEAD names (detached); without one HEAD is an unborn branch.
    `exclude` becomes `info/exclude`; `alternates` are object directories to read from.
    Raises FileExistsError when `path` exists: a directory someone else made is never reused.
    """
    path.mkdir(mode=0o700)
    for sub in ("objects/info", "refs/heads", "refs/tags", "info"):
        (path / sub).mkdir(parents=True)
    (path / "config").write_text(CONFIG)
    (path / "info" / "attributes").write_text(ATTRIBUTES)
    (path / "info" / "exclude").write_bytes(exclude)
    (path / "HEAD").write_text(f"{head}\n" if head else "ref: refs/heads/crucible\n")
    if alternates:
        lines = "".join(f"{os.path.abspath(directory)}\n" for directory in alternates)
        (path / "objects" / "info" / "alternates").write_text(lines)
    return path


def environment(git_dir: Path, *, work_tree: Path | None = None) -> dict[str, str]:
    """The whole environment for a git call on `git_dir` (and `work_tree`), built from nothing.

    Only PATH (to find git and what it runs itself) and TMPDIR come from the engine's own
    environment; HOME is the git directory, so nothing of the user's home is read or written.
    """
    env = {
        "PATH": os.environ.get("PATH") or os.defpath,
        "LC_ALL": "C",
        "HOME": str(git_dir),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_AUTHOR_NAME": IDENTITY[0],
        "GIT_AUTHOR_EMAIL": IDENTITY[1],
        "GIT_COMMITTER_NAME": IDENTITY[0],
        "GIT_COMMITTER_EMAIL": IDENTITY[1],
    }
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    return env
