"""Where a wide round's proposals run: here, or through a task runner that serves `[search].needs`.

`[search].needs` names what each proposal needs ("gpu"). When this run declares it (`crucible
run --cap gpu`), the proposals run here as always. Otherwise a task runner that serves it (the
Kubernetes one, configured by a `[deploy]` profile) carries each proposal's agent turn out
elsewhere: the backend's turn as one shell command (`ShellTurnBackend`: the `command` backend,
or the `local` backend over a harness that describes its turn as a command, like claude), the
fork shipped there and brought back edited. When neither can, the run is refused before anything starts,
saying what to configure; so is a backend whose turn is not one command.

A run hands in the runners it opened for everything (core's run/opened_runners.py's
`open_run_runners`, before the session log exists); `crucible check` lets this module open
them itself, as a probe that touches nothing remote.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from crucible_core.api import (
    AgentBackend,
    CapabilityUnserved,
    LoadedManifest,
    ShellTurnBackend,
    TaskRunner,
    open_configured_runners,
    runner_for,
    task_refusals,
)
from crucible_search_wide.graph import WIDE_PROPOSE, proposals_plan

HERE = "here"


def sent_elsewhere(needs: str | None, caps: frozenset[str]) -> bool:
    """Whether proposals needing `needs` leave this machine (it is not declared here)."""
    return needs is not None and needs != "any" and needs not in caps


def refuse_unsendable_turns(
    needs: str | None, caps: frozenset[str], backend: AgentBackend, backend_name: str
) -> None:
    """A round sent elsewhere needs a backend whose turn is one shell command (CapabilityUnserved)."""
    if sent_elsewhere(needs, caps) and not isinstance(backend, ShellTurnBackend):
        raise CapabilityUnserved(
            f"[search].needs = {needs!r} sends each wide proposal's agent turn to another machine, "
            f"and the {backend_name} backend cannot: its turn is not one shell command "
            "(the command backend's is, and so is the local backend's with a harness that describes "
            "its turn as a command, such as claude)",
            hint=(
                f'use backend = "command", or backend = "local" with harness = "claude", '
                f"or declare {needs!r} here with --cap {needs}"
            ),
        )


@attrs.frozen
class ProposalPlacement:
    """Where this run's wide proposals go, and what the executor needs to send them there.

    caps: what this run declares it provides (`--cap`).
    runners: the task runners the proposals' executor may use (empty when they run here).
    where: for notes and `crucible check`: "here", or the runner that takes them.
    owned: the runners were opened for this placement alone (`crucible check`): `close` them.
    """

    needs: str | None
    caps: frozenset[str]
    runners: tuple[TaskRunner, ...] = ()
    where: str = HERE
    owned: bool = False

    @property
    def remote(self) -> bool:
        return self.where != HERE

    def describe(self) -> str:
        if self.needs is None:
            return "the proposals run on this machine"
        if not self.remote:
            return f"the proposals need {self.needs!r}, which this run declares (--cap): they run on this machine"
        return f"the proposals need {self.needs!r}, which this machine lacks: they run through the {self.where} task runner"

    def close(self) -> None:
        if self.owned:
            for runner in self.runners:
                runner.close()


def place_proposals(
    plugins: Any,
    loaded: LoadedManifest,
    *,
    state_dir: Path,
    needs: str | None,
    caps: frozenset[str],
    backend: AgentBackend,
    backend_name: str,
    env: Mapping[str, str],
    runners: tuple[TaskRunner, ...] | None = None,
) -> ProposalPlacement:
    """Decide where the proposals run; CapabilityUnserved when they cannot run anywhere.

    `runners`: the run's open task runners. None (`crucible check`) opens them here as a
    probe, which touches nothing remote; the placement then owns them.
    """
    if not sent_elsewhere(needs, caps):
        return ProposalPlacement(needs, caps)
    assert needs is not None
    refuse_unsendable_turns(needs, caps, backend, backend_name)
    hint = (
        f"add a [deploy] profile whose [tasks].capabilities lists {needs!r} (docs/kubernetes.md), "
        f"or run on a machine that has it with `crucible run --cap {needs}`"
    )
    owned = runners is None
    if runners is None:
        runners = open_configured_runners(plugins, loaded, state_dir=state_dir, env=env, offline=True)
    task = proposals_plan([1], needs).tasks[0]
    chosen = runner_for(task, WIDE_PROPOSE, runners)  # the executor's own rule, so they agree
    if chosen is not None:
        return ProposalPlacement(needs, caps, runners, chosen.name, owned)
    declined = task_refusals(task, WIDE_PROPOSE, runners)
    if owned:
        for runner in runners:
            runner.close()
    if declined:
        where = "; ".join(declined)
    elif loaded.manifest.deploy is None:
        where = "no task runner serves it (the manifest has no [deploy] section)"
    elif not runners:
        where = (
            "no task runner serves it (no installed plugin runs tasks from [deploy]; "
            "the Kubernetes one is crucible-plugin-deploy-kubernetes)"
        )
    else:
        where = (
            "no task runner serves it ("
            + ", ".join(
                f"{runner.name} serves {', '.join(sorted(runner.provides())) or 'nothing'}"
                for runner in runners
            )
            + ")"
        )
    raise CapabilityUnserved(
        f"[search].needs = {needs!r}: this run does not declare it (--cap) and {where}", hint=hint
    )
