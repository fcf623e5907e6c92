"""crucible-plugin-world-git: GitWorld and CommandWorld on dulwich, a playbook's git memory, `crucible diff`.

Only hook implementations live here; the worlds and dulwich load when a hook first runs, so
`crucible --help` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import Deferred, hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import (
        Register,
        WorkspaceMemory,
        WorkspaceMemoryContext,
        WorkspaceMemoryFactory,
        World,
        WorldContext,
        WorldFactory,
    )


# The factories import their modules on first use: listing plugins (`crucible plugins`,
# `crucible check`'s driver check) must not import dulwich.
def _git_world(ctx: WorldContext) -> World:
    from crucible_world_git.gitworld import GitWorld

    return GitWorld.from_context(ctx)


def _command_world(ctx: WorldContext) -> World:
    from crucible_world_git.commandworld import CommandWorld

    return CommandWorld.from_context(ctx)


@hookimpl
def crucible_register_worlds(register: Register[WorldFactory]) -> None:
    register("git", _git_world)
    register("command", _command_world, settings="crucible_world_git.settings:CommandWorldSettings")


def _playbook_memory(ctx: WorkspaceMemoryContext) -> WorkspaceMemory:
    from crucible_world_git.playbook_memory import PlaybookMemory

    return PlaybookMemory.from_context(ctx)


@hookimpl
def crucible_register_workspace_memories(register: Register[WorkspaceMemoryFactory]) -> None:
    register("git", _playbook_memory)


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    register("diff", Deferred("crucible_world_git.diff_cmd:command"))
