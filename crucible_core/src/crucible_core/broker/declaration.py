"""The resolved declaration: output bounds, disclosed capabilities and granted tools, from one manifest.

`crucible check`, `crucible plan exposure`, the agent's prompt and the broker itself all read
this one value, so what is printed, what is disclosed and what is enforced cannot diverge. It
is computed from the frozen manifest, the installed vocabulary and the engine's environment;
no pack command runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.broker.outputs import (
    OUTPUTS_WIRE_VERSION,
    FixedTarget,
    OutputKindSpec,
    ResolvedOutput,
    param_problems,
)
from crucible_core.broker.reach import EgressReach, egress_of, unrestricted
from crucible_core.contract.records import value_methods
from crucible_core.errors import ManifestError, UncoveredGrant
from crucible_core.manifest.broker_sections import SecretCapability
from crucible_core.manifest.loader import LoadedManifest
from crucible_core.manifest.service_declaration import ServiceSecret
from crucible_core.registry import provider_of

if TYPE_CHECKING:  # the catalog's module loads only where a run declares services
    from crucible_core.services.catalog import Handoff

# The distribution of the standard set that provides the broker and its tools.
BROKER_DISTRIBUTION = "crucible-plugin-broker-mcp"

EXPOSURE_VERSION = 1


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class AgentEnvGrant:
    """One [agent].env name: a credential (or setting) whose value enters the agent's context."""

    name: str
    disclosed_as: SecretCapability | None  # the [[capabilities.secret]] describing it, if any

    def to_wire(self) -> dict[str, Any]:
        declared = self.disclosed_as
        return {
            "name": self.name,
            "context": "agent",
            "system": declared.system if declared else None,
            "scope": declared.scope if declared else None,
            "declared": declared is not None,
        }


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ServiceRelay:
    """One declared run service as the disclosure lists it (C-SERVICE-SECRETS): a relay that holds
    its own secrets, reached only by the tasks that need it, perhaps handing them a credential."""

    name: str
    tool: str
    secrets: tuple[ServiceSecret, ...]
    exposed_to: tuple[str, ...]  # task names, and "agent turns" for [agent].services
    forward: str  # how those tasks reach it: the engine's loopback forward, or a sandbox gateway's
    handoff: Handoff | None = None  # a credential it hands needing tasks (enters agent context)

    def to_wire(self) -> dict[str, Any]:
        return {
            "service": self.name,
            "tool": self.tool,
            "secrets": [
                {"name": s.name, "context": "service", "system": s.system, "scope": s.scope}
                for s in self.secrets
            ],
            "exposed_to": list(self.exposed_to),
            "forward": self.forward,
            "handoff": None
            if self.handoff is None
            else {
                "env": self.handoff.env,
                "context": "agent",
                "target": self.handoff.target,
                "scope": self.handoff.scope,
            },
        }

    def describe(self) -> str:
        secrets = ", ".join(f"{s.name} ({s.system}: {s.scope})" for s in self.secrets) or "no secrets"
        text = (
            f"  service relay {self.name}: tool {self.tool} holds {secrets}; "
            f"reached by {', '.join(self.exposed_to) or 'nothing'} through {self.forward}"
        )
        if self.handoff is not None:
            text += (
                f"; hands them {self.handoff.env} (enters the agent's context: "
                f"{self.handoff.target}, {self.handoff.scope})"
            )
        return text


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Disclosure:
    """What the run can reach beyond its mediated writes (C-CAPABILITY-DISCLOSURE)."""

    secrets: tuple[SecretCapability, ...]
    agent_env: tuple[AgentEnvGrant, ...]
    agent_sandbox: str | None  # the sandbox the agent runs in; None: it runs with the engine's reach
    host_commands: tuple[str, ...]  # pack commands that run outside any sandbox, by manifest key
    broker_tools: tuple[str, ...]  # tools granted to every turn (empty: no broker)
    # Where the agent's turns may connect, as the backend states it (broker/reach.py)
    egress: EgressReach = attrs.field(factory=lambda: unrestricted(""))
    relays: tuple[ServiceRelay, ...] = ()  # the declared run services (service_relays)

    def to_wire(self) -> dict[str, Any]:
        return {
            "secrets": [
                {
                    "name": s.name,
                    "context": s.context,
                    "system": s.system,
                    "scope": s.scope,
                    "source": "manifest",
                }
                for s in self.secrets
            ],
            "agent_env": [grant.to_wire() for grant in self.agent_env],
            "agent_sandbox": self.agent_sandbox,
            "commands_outside_sandbox": bool(self.host_commands),
            "host_commands": list(self.host_commands),
            "egress": self.egress.to_wire(),
            "relays": [relay.to_wire() for relay in self.relays],
            "broker_tools": list(self.broker_tools),
        }

    def uncovered_env(self, name: str) -> str | None:
        """Why an agent environment variable added outside [agent].env is not covered, or None.

        Covered: an [agent].env name, or a [[capabilities.secret]] with context = "agent".
        """
        if any(grant.name == name for grant in self.agent_env):
            return None
        declared = next((s for s in self.secrets if s.name == name), None)
        if declared is None:
            return (
                f"no [agent].env entry or [[capabilities.secret]] names {name}: add "
                f'[[capabilities.secret]] name = "{name}" with context = "agent", system and scope'
            )
        if declared.context != "agent":
            return (
                f"[[capabilities.secret]] {name} discloses it as {declared.context}-held "
                f"(context = {declared.context!r}), so its value may not enter the agent's environment"
            )
        return None

    def uncovered_grants(self) -> list[str]:
        """Grants the disclosure does not cover, each naming the grant and what is missing."""
        problems = []
        for grant in self.agent_env:
            declared = grant.disclosed_as
            if declared is not None and declared.context != "agent":
                problems.append(
                    f"[agent].env grants {grant.name} to the agent, but [[capabilities.secret]] {grant.name} "
                    f"discloses it as {declared.context}-held (context = {declared.context!r}): "
                    'set context = "agent" or move the value out of [agent].env'
                )
        return problems


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Declaration:
    outputs: tuple[ResolvedOutput, ...]
    capabilities: Disclosure

    def to_wire(self) -> dict[str, Any]:
        """The `crucible plan exposure` document."""
        return {
            "version": EXPOSURE_VERSION,
            "outputs": {"version": OUTPUTS_WIRE_VERSION, "outputs": [o.to_wire() for o in self.outputs]},
            "capabilities": self.capabilities.to_wire(),
        }

    def output(self, kind: str) -> ResolvedOutput | None:
        return next((o for o in self.outputs if o.kind == kind), None)

    def describe(self) -> list[str]:
        """Lines for `crucible check` and the agent's prompt (the same words in both)."""
        lines = ["Output bounds (mediated writes per run):"]
        for o in self.outputs:
            origin = "declared" if o.source == "manifest" else "engine default"
            lines.append(f"  {o.kind}: at most {o.count}, {o.describe_target()} ({origin})")
        c = self.capabilities
        lines.append("Capabilities:")
        lines.append(
            "  broker tools: "
            + (", ".join(f"mcp__crucible__{t}" for t in c.broker_tools) or "none (no broker)")
        )
        for s in c.secrets:
            where = "in the agent's environment" if s.context == "agent" else "held by the broker"
            lines.append(f"  secret {s.name}: {where}; authorizes {s.system} ({s.scope})")
        for grant in c.agent_env:
            if grant.disclosed_as is None:
                lines.append(
                    f"  agent env {grant.name}: in the agent's environment (no [[capabilities.secret]])"
                )
        lines.append(
            "  agent sandbox: "
            + (
                c.agent_sandbox
                or "none: the agent runs with the engine's own reach (files, network, processes)"
            )
        )
        lines += c.egress.describe()
        if c.host_commands:
            lines.append("  pack commands run outside any sandbox: " + ", ".join(c.host_commands))
        lines += [relay.describe() for relay in c.relays]
        return lines

    def prompt_text(self, tools_missing: str | None = None) -> str:
        """What the agent is told it has: the lines `crucible check` prints, and the rule on bounds.

        `tools_missing` says why granted tools cannot be called this run (no broker serves them,
        or the harness takes no MCP servers), and the tools line says so instead of listing them.
        """
        said = _SAID.get(id(self))
        if said is not None and said[0] is self and said[1] == tools_missing:
            return said[2]  # the same frozen record, the same reason: the same words
        lines = self.describe()
        if tools_missing is not None and self.capabilities.broker_tools:
            lines = [
                f"  broker tools: none ({tools_missing})" if line.startswith("  broker tools:") else line
                for line in lines
            ]
        lines.append(
            "A write outside these bounds is refused and recorded; it does not end the run. "
            "Bounds cannot be changed from inside the run."
        )
        text = "\n".join(lines)
        if len(_SAID) >= _SAID_MAX:
            _SAID.clear()
        _SAID[id(self)] = (self, tools_missing, text)
        return text


# The words each declaration last gave the prompt (by identity; the record is frozen): every turn's
# prompt states them, and wording them again cost more than the rest of the prompt's status.
_SAID: dict[int, tuple[Declaration, str | None, str]] = {}
_SAID_MAX = 64


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    import difflib  # for a hint only, so not imported at start-up

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def resolve_outputs(
    loaded: LoadedManifest, kinds: Mapping[str, OutputKindSpec], environ: Mapping[str, str]
) -> tuple[ResolvedOutput, ...]:
    declared = loaded.manifest.outputs
    where = loaded.path
    publish = loaded.manifest.publish
    if publish is not None and publish.record and "run-record" not in kinds:
        raise ManifestError(
            f"{where}: [publish].record names a results destination, but no installed plugin writes run records",
            hint=f"pip install {provider_of('output kind', 'run-record')}, or remove [publish].record",
        )
    for name in declared:
        if name not in kinds:
            provider = provider_of("output kind", name)
            raise ManifestError(
                f"{where}: [outputs.{name}] is not an output kind{_did_you_mean(name, kinds)}",
                hint=f"pip install {provider}: it provides this kind"
                if provider
                else f"the kinds are: {', '.join(sorted(kinds))}",
            )
    resolved = []
    for name in sorted(kinds):  # by name: plugins register the vocabulary in no fixed order
        spec = kinds[name]
        declaration = declared.get(name)
        if declaration is not None:
            if not spec.addresses_target and declaration.target is not None:
                raise ManifestError(f"{where}: [outputs.{name}] addresses nothing, so it takes no target")
            if spec.addresses_target and declaration.target is None:
                raise ManifestError(
                    f"{where}: [outputs.{name}] needs a target",
                    hint='add target = { fixed = "..." } or { open = { scope = "..." } }',
                )
            resolved.append(
                ResolvedOutput(
                    name,
                    declaration.count,
                    declaration.target,
                    "manifest",
                    spec.addresses_target,
                    spec.description,
                )
            )
            continue
        default = spec.default_target
        if spec.default_target_env:
            default = (environ.get(spec.default_target_env) or "").strip() or default
        if name == "draft-pr" and loaded.manifest.publish is not None:
            default = loaded.manifest.publish.pr_repo  # the pack's own publish target comes first
        if name == "run-record" and loaded.manifest.publish is not None and not default:
            default = loaded.manifest.publish.record  # the run flag's destination comes first
        target = FixedTarget(default) if spec.addresses_target and default else None
        resolved.append(
            ResolvedOutput(
                name, spec.default_count, target, "engine-default", spec.addresses_target, spec.description
            )
        )
    return tuple(resolved)


def host_commands(loaded: LoadedManifest) -> tuple[str, ...]:
    """Pack-authored commands the engine runs outside any sandbox, by their manifest keys.

    Read by name: a driver's keys live in its own settings table, so a key is present only when
    the manifest's sections carry it.
    """
    m = loaded.manifest
    settings = loaded.settings
    found = []
    for table, sections, keys in (
        ("workspace", (m.workspace,), ("setup_cmd",)),
        ("world", (m.world, settings.of("world")), ("apply_cmd", "snapshot_cmd", "restore_cmd")),
        ("judge", (m.judge,), ("measure_cmd",)),
        # the command backend's agent_cmd is its plugin's setting, not a core key
        ("agent", (m.agent, settings.of("backend")), ("agent_cmd",)),
    ):
        for key in keys:
            if any(section is not None and getattr(section, key, None) for section in sections):
                found.append(f"[{table}].{key}")
    if m.judge is not None and getattr(m.judge, "selftest", None) is not None:
        found.append("[judge.selftest]")
    return tuple(found)


def service_relays(
    loaded: LoadedManifest, environ: Mapping[str, str], egress: EgressReach | None = None
) -> tuple[ServiceRelay, ...]:
    """Each declared [[service]] as a relay: its secrets, who reaches it, what it hands them.

    Who needs it is read from the manifest's [[workflow.task]] tables (tasks whose `needs` names
    it) and from [agent].services; the handoff's target and scope come from the operator's catalog, when it
    attests the tool.
    """
    if not loaded.services:
        return ()
    from crucible_core.services.catalog import load_catalog

    catalog = load_catalog(environ)
    # Tasks are named when the graph is written as [[workflow.task]] tables; a workflow.star
    # graph is not compiled here (the broker sits below the compiler), so its tasks are named by
    # their needs instead.
    workflow = loaded.manifest.workflow
    tables = workflow.task if workflow is not None else ()
    known = bool(tables)
    needed_by: dict[str, list[str]] = {}
    for task in tables:
        needed_by.setdefault(str(task.get("needs", "any")), []).append(str(task.get("name")))
    forward = "the engine's authenticating loopback forward"
    if (
        egress is not None and egress.sandbox is not None
    ):  # a sandboxing backend exposes it through its gateway
        forward = (
            f"a bearer-checking forward the {egress.by or 'sandbox'} backend exposes to {egress.sandbox}"
        )
    relays = []
    for service in loaded.services:
        exposed = (
            list(needed_by.get(service.capability, []))
            if known
            else [f"every task whose needs is {service.capability}"]
        )
        if service.name in loaded.manifest.agent.services:
            exposed.append("agent turns")
        entry = catalog.entry(service.tool)
        relays.append(
            ServiceRelay(
                name=service.name,
                tool=service.tool,
                secrets=service.secrets,
                exposed_to=tuple(exposed),
                forward=forward,
                handoff=entry.handoff if entry is not None else None,
            )
        )
    return tuple(relays)


def granted_tools(loaded: LoadedManifest, tools: Iterable[str]) -> tuple[str, ...]:
    installed = sorted(tools)
    section = loaded.manifest.agent.broker
    if section.enabled is False:
        return ()
    if section.enabled is True and not installed:
        raise ManifestError(
            f"{loaded.path}: [agent.broker].enabled = true, but no installed plugin provides broker tools",
            hint=f"pip install {BROKER_DISTRIBUTION}, or remove [agent.broker]",
        )
    if section.tools is None:
        return tuple(installed)
    for name in section.tools:
        if name not in installed:
            provider = provider_of("broker tool", name)
            raise ManifestError(
                f"{loaded.path}: [agent.broker].tools names {name!r}, which no installed plugin provides"
                f"{_did_you_mean(name, installed)}",
                hint=f"pip install {provider}: it provides this tool"
                if provider
                else f"installed broker tools: {', '.join(installed) or 'none'}",
            )
    return tuple(sorted(set(section.tools)))


def resolve(
    loaded: LoadedManifest,
    kinds: Mapping[str, OutputKindSpec],
    tools: Iterable[str],
    environ: Mapping[str, str] | None = None,
) -> Declaration:
    """The whole declaration; raises ManifestError naming the key for what the vocabulary refuses."""
    m = loaded.manifest
    secrets = {s.name: s for s in m.capabilities.secret}
    # The selected backend states its agent's egress through its settings, and the harness it
    # runs what its program needs on top (broker/reach.py).
    egress = egress_of(m.agent.backend, loaded.settings.of("backend"), loaded.settings.of("harness"))
    environ = os.environ if environ is None else environ
    disclosure = Disclosure(
        secrets=tuple(m.capabilities.secret),
        agent_env=tuple(AgentEnvGrant(name, secrets.get(name)) for name in sorted(m.agent.env)),
        agent_sandbox=egress.sandbox,
        host_commands=host_commands(loaded),
        broker_tools=granted_tools(loaded, tools),
        egress=egress,
        relays=service_relays(loaded, environ, egress),
    )
    outputs = resolve_outputs(loaded, kinds, environ)
    return Declaration(outputs, disclosure)


def refuse_uncovered(declaration: Declaration, params: Mapping[str, str] | None = None) -> None:
    """Run start: a grant the disclosure does not cover, or a run parameter outside the scope it
    binds, ends the run before anything is reached."""
    problems = declaration.capabilities.uncovered_grants() + param_problems(declaration.outputs, params or {})
    if problems:
        raise UncoveredGrant("; ".join(problems))
