"""crucible-plugin-world-git: GitWorld and CommandWorld, git-backed reversibility on dulwich.

Only hook implementations live here; the worlds and dulwich load when a hook first runs, so
`crucible --help` does not pay for them.
"""

from __future__ import annotations

from crucible_core.api import (
    Publisher,
    PublisherFactory,
    Register,
    World,
    WorldContext,
    WorldFactory,
    hookimpl,
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
    from crucible_world_git.settings import CommandWorldSettings

    register("git", _git_world)
    register("command", _command_world, settings=CommandWorldSettings)


def _github_publisher() -> Publisher:
    from crucible_world_git.publish_github import GitHubPublisher

    return GitHubPublisher()


@hookimpl
def crucible_register_publishers(register: Register[PublisherFactory]) -> None:
    register("github", _github_publisher)
