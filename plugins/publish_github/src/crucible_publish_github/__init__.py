"""crucible-plugin-publish-github: the `github` publisher (`[publish].forge = "github"`), publish-on-keep,
the forge's output kinds (draft-pr, workflow-dispatch: kinds.py), and `crucible watch-pr` (watch_pr.py).

Publish-on-keep runs from the lifecycle hooks, for whichever registered publisher `[publish].forge`
names (core resolves it before the run, refusing a forge nobody installed, and hands it over as
`RunContext.publisher`): at run start a loop run with `[publish]` gets a KeptPublisher
(on_keep.py); each `crucible_commit_kept` asks the run's mediation point for one draft-pr write
and only then publishes; run end lets it go. The github publisher (and dulwich, through the git
world) loads only when a run first builds it, so `crucible --help` does not pay for it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import (
        KeptCommit,
        OutputKindSpec,
        Publisher,
        PublisherFactory,
        Register,
        RunContext,
        RunEnd,
    )
    from crucible_publish_github.on_keep import KeptPublisher

# One publish-on-keep per loop run this process drives, keyed by run id (tests drive several).
_publishing: dict[str, KeptPublisher] = {}


def _github_publisher() -> Publisher:
    from crucible_publish_github.github import GitHubPublisher

    return GitHubPublisher()


# The forge's output kinds by name, built on first use (listing plugins builds none).
FORGE_KINDS = ("draft-pr", "workflow-dispatch")


def _forge_kind(name: str) -> OutputKindSpec:
    from crucible_publish_github.kinds import KINDS

    return {kind.name: kind for kind in KINDS}[name]


@hookimpl
def crucible_register_output_kinds(register: Register[OutputKindSpec]) -> None:
    from crucible_core.api import Deferred

    for name in FORGE_KINDS:
        register(name, Deferred(functools.partial(_forge_kind, name)))


@hookimpl
def crucible_register_commands(register: Register[click.Command]) -> None:
    from crucible_core.api import Deferred

    register("watch-pr", Deferred("crucible_publish_github.watch_pr:command"))


@hookimpl
def crucible_register_publishers(register: Register[PublisherFactory]) -> None:
    register("github", _github_publisher)


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    section = context.manifest.manifest.publish if context.manifest is not None else None
    if section is None or context.publisher is None or context.broker is None:
        return  # no [publish] (a playbook refuses one; a plan file has no manifest)
    from crucible_publish_github.on_keep import KeptPublisher

    _publishing[context.run_id] = KeptPublisher(
        section,
        context.publisher,
        context.broker.admit,
        context.note,
        context.run_id,
        context.workspace,
        context.engine_env,
    )


@hookimpl
def crucible_commit_kept(kept: KeptCommit) -> None:
    publishing = _publishing.get(kept.run.run_id)
    if publishing is not None:
        publishing.on_keep(kept.iteration, kept.sha, kept.summary)  # mediated; never ends the run


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    _publishing.pop(end.run.run_id, None)
