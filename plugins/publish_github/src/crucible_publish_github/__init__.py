"""crucible-plugin-publish-github: the `github` publisher, `[publish].forge = "github"`.

Only the hook implementation lives here; the publisher (and dulwich, through the git world)
loads when a run first builds it, so `crucible --help` does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import Publisher, PublisherFactory, Register


def _github_publisher() -> Publisher:
    from crucible_publish_github.github import GitHubPublisher

    return GitHubPublisher()


@hookimpl
def crucible_register_publishers(register: Register[PublisherFactory]) -> None:
    register("github", _github_publisher)
