"""The agent's network reach as the disclosure states it, and the seam a backend states it through.

Core never imports a backend plugin, so a backend that confines its agent (a sandbox with an
egress allowlist) says what the confinement allows through its settings object: a settings
class with a `disclosed_egress()` method returning an `EgressReach`. A backend without one
confines nothing, and the disclosure says so truthfully: the agent reaches whatever the host
reaches. The value is computed from the frozen manifest only; no pack command runs.

A harness whose program needs reach of its own (its model provider, its sign-in service) says
so the same way, through its settings class's `sandbox_egress()`: a confining backend adds that
reach to every sandbox running the harness, and the disclosure states it, so a claude turn's
allowlist carries nothing another harness needs.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.errors import PluginError

BUILTIN = "builtin"  # the disclosure's label for standing reach (C-CAPABILITY-DISCLOSURE)
EGRESS_SOURCES = (BUILTIN, "manifest")  # standing reach, or reach the manifest names


def _source(label: str) -> str:
    # "built-in" is how this engine spelled it before; the specification's label is "builtin"
    return BUILTIN if label == "built-in" else label


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class EgressEndpoint:
    """One allowed destination, in C-EGRESS terms: host (or `*.domain`), port and access class."""

    host: str
    port: int
    access: str
    # "builtin" (standing reach) or "manifest" (the pack named it)
    source: str = attrs.field(converter=_source)

    def to_wire(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "access": self.access, "source": self.source}

    def describe(self) -> str:
        return f"{self.host}:{self.port} {self.access} ({self.source})"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class EgressReach:
    """Where the agent's turns may open connections."""

    restricted: bool  # False: no allowlist confines the agent (it has the host's network)
    endpoints: tuple[EgressEndpoint, ...] = ()
    binaries: tuple[str, ...] = ()  # programs allowed to open a socket; empty: not narrowed by program
    sandbox: str | None = None  # what confines the agent, in words ("a sandbox from image X")
    by: str = ""  # the backend that states this reach

    def to_wire(self) -> dict[str, Any]:
        return {
            "restricted": self.restricted,
            "endpoints": [e.to_wire() for e in self.endpoints],
            "binaries": list(self.binaries),
            "by": self.by,
        }

    def describe(self) -> list[str]:
        """Lines for `crucible check` and the agent's prompt."""
        if not self.restricted:
            return [
                f"  egress: unrestricted: the agent's turns reach whatever this host reaches "
                f"(backend {self.by or 'unknown'} runs no egress allowlist)"
            ]
        lines = [f"  egress: only these {len(self.endpoints)} endpoint(s) (backend {self.by}):"]
        lines += [f"    {endpoint.describe()}" for endpoint in self.endpoints]
        if self.binaries:
            lines.append("    programs allowed to connect: " + ", ".join(self.binaries))
        return lines


def unrestricted(backend: str) -> EgressReach:
    return EgressReach(restricted=False, by=backend)


@runtime_checkable
class DisclosesEgress(Protocol):
    """Implemented by a backend's settings class when the backend confines the agent's network."""

    def disclosed_egress(self) -> EgressReach: ...


@runtime_checkable
class NeedsEgress(Protocol):
    """Implemented by a harness's settings class when its program needs reach of its own in a sandbox."""

    def sandbox_egress(self) -> EgressReach: ...


def egress_of(backend: str, settings: object, harness_settings: object = None) -> EgressReach:
    """The reach a backend's resolved settings disclose, with what the harness it runs needs added;
    unrestricted when the backend states none."""
    if isinstance(settings, DisclosesEgress):
        reach = settings.disclosed_egress()
        if not isinstance(reach, EgressReach):
            raise PluginError(
                f"backend {backend}: its settings' disclosed_egress() returned "
                f"{type(reach).__name__}, not an EgressReach"
            )
        return with_harness_reach(attrs.evolve(reach, by=reach.by or backend), harness_settings)
    return unrestricted(backend)


def with_harness_reach(reach: EgressReach, harness_settings: object) -> EgressReach:
    """A restricted reach widened by what the harness's program needs (endpoints not already there)."""
    if not reach.restricted or not isinstance(harness_settings, NeedsEgress):
        return reach
    needed = harness_settings.sandbox_egress()
    known = {(e.host.lower(), e.port) for e in reach.endpoints}
    added = tuple(e for e in needed.endpoints if (e.host.lower(), e.port) not in known)
    binaries = tuple(dict.fromkeys((*reach.binaries, *needed.binaries)))
    return attrs.evolve(reach, endpoints=(*reach.endpoints, *added), binaries=binaries)
