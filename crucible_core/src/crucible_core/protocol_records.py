"""Records of the driver protocols that a run of a command agent never builds, defined on first use.

A command's standard input (`ShellStdin`), a sandbox's layout and command (`SandboxLayout`,
`SandboxCommand`), a started service tool (`ServedTool`) and a publish request (`PublishRequest`)
are only made by harnesses in a sandbox, task runners, run services and publishers. They were
defined at every start with the rest of `protocols.py`, about half a millisecond (issue 27,
docs/performance.md); `protocols` now loads this module the first time one of these names is
asked for (its `__getattr__`). Import them from `crucible_core.protocols` or `crucible_core.api`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from crucible_core.contract.records import value_methods

if TYPE_CHECKING:
    from crucible_core.protocols import TurnResult


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ShellStdin:
    """What a command reads on its standard input (an agent turn's prompt).

    file_env: a variable the shell sets to the path of a file holding the same bytes, where the
      command runs (a turn's CRUCIBLE_PROMPT_FILE), so a command may read either.
    """

    data: bytes
    file_env: str | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SandboxLayout:
    """Where things live inside a sandbox (the sandbox's own absolute paths)."""

    workdir: str  # the uploaded workspace, the program's working directory
    home: str  # HOME for the program
    private: str  # a directory for files only the program reads (configs holding tokens)
    # Whether the command's `files` stay private to this sandbox (uploaded into it, 0600, gone
    # with it), so a harness may seed a credential the engine holds there. False where the
    # command and its files travel inside another system's records (a task pod's Job): the
    # credential must then come from that place's own environment.
    carries_secrets: bool = True


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SandboxCommand:
    """One harness turn as a command a backend runs in its sandbox, and how to read what it did.

    The backend feeds each stdout line to `on_stdout_line` as it arrives, then calls `finish`
    with what the command did (a `crucible_core.process.Completed`) to get the turn's result.
    `files` are written into the sandbox (mode 0600) before the command starts, keyed by their
    sandbox path. `session_dirs` hold the program's own conversation store: the backend saves
    them after the turn (mode 0600, in the run's private state) and puts them back into the
    next fresh sandbox of the same logical session.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    stdin: bytes
    on_stdout_line: Callable[[str], None]
    finish: Callable[[Any], TurnResult]
    files: Mapping[str, bytes] = attrs.field(factory=dict)
    session_dirs: tuple[str, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServedTool:
    """One started instance of a catalog tool, as a transport receives it.

    port: the loopback port the tool was given (CRUCIBLE_SERVICE_PORT); stdin/stdout: its standard
    streams for the `mcp-stdio` transport (the engine started it with pipes), else None.
    bearer: what the forward must require of every request (minted by the engine, per service).
    """

    service: str
    port: int
    mcp_path: str
    bearer: str = attrs.field(repr=False)
    stdin: IO[bytes] | None = None
    stdout: IO[bytes] | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PublishRequest:
    """A run's newest kept commit to publish as its one draft pull request (opened the first time,
    updated after); the mediation point already admitted the pull request."""

    repo: str  # owner/name on the forge: the admitted draft-pr target
    base: str  # the branch the pull request asks to merge into (when no base_sha pins one)
    branch: str  # the run's own branch (crucible/<run id>), moved to each newer kept commit
    sha: str  # the kept commit, present in the workspace's repository
    workspace: Path
    title: str
    body: str
    env: Mapping[str, str]  # the engine's environment (the forge credential lives here, never the agent's)
    timeout: float  # seconds the whole publish may take
    # The heads the branch may already be at: what this run last pushed, and what a push a kill
    # interrupted may have left. Empty: the branch must not exist yet. Any other head is refused
    # (the push is a force-with-lease on what was found), so nobody else's work is overwritten.
    lease: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    # The commit the agent edited against: pinned as `<branch>-base` and used as the pull
    # request's base, so its diff is exactly the run's commits however the fork moved. None: `base`.
    base_sha: str | None = attrs.field(default=None, kw_only=True)
