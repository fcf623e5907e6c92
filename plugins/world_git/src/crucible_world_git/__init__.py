"""crucible-plugin-world-git: GitWorld and CommandWorld, git-backed reversibility on dulwich.

Only hook implementations live here; the worlds and dulwich load when a hook first runs, so
`crucible --help` does not pay for them.
"""

from __future__ import annotations

from pathlib import Path

from crucible_core.hookspecs import hookimpl
from crucible_core.protocols import WorldFactory
from crucible_core.registry import Register


@hookimpl
def crucible_register_worlds(register: Register[WorldFactory]) -> None:
    from crucible_world_git.commandworld import CommandWorld
    from crucible_world_git.gitworld import GitWorld

    register("git", GitWorld.from_context)
    register("command", CommandWorld.from_context)


@hookimpl
def crucible_read_pristine(workspace: Path, relpath: str) -> bytes | None:
    from crucible_world_git.pristine import read_pristine

    return read_pristine(workspace, relpath)
