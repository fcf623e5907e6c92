"""crucible-plugin-publish-github: the `github` publisher (`[publish].forge = "github"`), publish-on-keep,
the forge's output kinds (draft-pr, workflow-dispatch: kinds.py), and `crucible watch-pr` (watch_pr.py).

Publish-on-keep runs from the lifecycle hooks, for whichever registered publisher `[publish].forge`
names (core resolves it before the run, refusing a forge nobody installed, and hands it over as
`RunContext.publisher`): at run start a loop run with `[publish]` gets a KeptPublisher
(on_keep.py; a resume finishes what an earlier process left under way); the first
`crucible_commit_kept` asks the run's mediation point for the run's one draft-pr write, and every
keep hands its commit to a background worker that opens or updates the run's one draft pull
request; run end gives the worker a bounded time to finish. The github publisher (and dulwich, through the git
world) loads only when a run first builds it, so `crucible --help` does not pay for it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    import click

    from crucible_core.api import (
        Collected,
        KeptCommit,
        OutputKindSpec,
        Publisher,
        PublisherFactory,
        Register,
        RunContext,
        RunEnd,
    )
    from crucible_publish_github.body import EmbeddedArtifact
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
def crucible_engine_credentials() -> tuple[str, ...]:
    """The forge token the publisher and watch-pr use: the engine's, never an agent turn's."""
    # not from github.py: every run asks, and that module's HTTP client is not cheap to import
    from crucible_publish_github.credentials import TOKEN_ENVS

    return TOKEN_ENVS


@hookimpl
def crucible_register_publishers(register: Register[PublisherFactory]) -> None:
    register("github", _github_publisher)


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    section = context.manifest.manifest.publish if context.manifest is not None else None
    if section is None or context.publisher is None or context.broker is None:
        # no [publish] (a plan file has no manifest), no publisher, or no mediation point to admit
        # the write: a playbook lane gets one only when it opens a broker
        return
    from crucible_core.api import read_events
    from crucible_publish_github.on_keep import KeptPublisher, Target

    assert context.manifest is not None
    components = context.manifest.components
    if components:
        # a composite: one pull request per component whose own domain declares [publish]
        targets = tuple(
            Target.of_component(context.run_id, c.name, own, context.workspace)
            for c in components
            if (own := c.loaded.manifest.publish) is not None
        )
    else:
        targets = (Target.of_run(context.run_id, section, context.workspace),)
    if not targets:
        context.note(
            "[publish] is set but no component declares its own [publish]: nothing is published", "warn"
        )
        return
    record = getattr(section, "record", None)  # the run record's address, where a records plugin adds it
    publishing = KeptPublisher(
        targets,
        context.publisher,
        context.broker.admit,
        context.note,
        context.run_id,
        context.engine_env,
        context.session_log,
        context.private_dir / "publish_github",
        emit=context.emit,
        record=record if isinstance(record, str) else None,
    )
    _publishing[context.run_id] = publishing
    if context.resumed:
        publishing.resume(list(read_events(context.session_log)))


def _embeds(collected: Collected) -> tuple[EmbeddedArtifact, ...]:
    """The declared artifacts a pull request body shows: each embed taken, with its redacted text."""
    from crucible_publish_github.body import EmbeddedArtifact

    return tuple(EmbeddedArtifact(item.title, item.text) for item in collected.embeds if item.taken)


@hookimpl
def crucible_commit_kept(kept: KeptCommit) -> None:
    publishing = _publishing.get(kept.run.run_id)
    if publishing is not None:
        if kept.artifacts is not None:
            publishing.artifacts = _embeds(kept.artifacts)
        publishing.on_keep(kept.iteration, kept.sha)  # mediated, then handed to the worker


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    publishing = _publishing.pop(end.run.run_id, None)
    if publishing is None:
        return
    if end.artifacts is not None:
        publishing.artifacts = _embeds(end.artifacts)
    if end.run.lane == "playbook":
        # a playbook keeps nothing turn by turn: commits beyond its base are what it publishes
        publishing.publish_beyond_base(end.iterations)
    publishing.finish()  # bounded: a hung forge leaves the rest to a resume
