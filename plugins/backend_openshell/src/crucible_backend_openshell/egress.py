"""The sandbox's egress allowlist, resolved from the built-ins, the manifest and the turn's services.

Deny by default: the sandbox reaches only what this resolves to. With `inherit_defaults` the
manifest's endpoints and binaries are appended to the built-ins (duplicates dropped, a
built-in is never removed); without it the list is exactly what the manifest names. Engine
plumbing (the forward of a run service a turn needs) is appended either way, because the
domain opted into it by needing the service, and only for the sandbox of that turn. So is the
reach the selected harness's program needs to run at all (`sandbox_egress()` on the harness:
its provider's API, its sign-in service), and only in that harness's sandboxes: a claude turn's
allowlist carries nothing another harness needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from crucible_backend_openshell.settings import Endpoint, OpenShellTable
from crucible_core.api import BUILTIN, EgressReach

# Standing reach every sandbox gets unless the manifest opts out: the public forges, PyPI,
# the model providers the Claude harness talks to (Anthropic, Vertex), and the npm registry
# the agent CLIs install from.
BUILTIN_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("github.com", 443, "read-only"),
    Endpoint("codeload.github.com", 443, "read-only"),
    Endpoint("objects.githubusercontent.com", 443, "read-only"),
    Endpoint("gitlab.com", 443, "read-only"),
    Endpoint("pypi.org", 443, "read-only"),
    Endpoint("files.pythonhosted.org", 443, "read-only"),
    Endpoint("api.anthropic.com", 443, "full"),
    Endpoint("aiplatform.googleapis.com", 443, "full"),
    Endpoint("*.aiplatform.googleapis.com", 443, "full"),
    Endpoint("oauth2.googleapis.com", 443, "full"),
    Endpoint("registry.npmjs.org", 443, "read-only"),
)
# Programs allowed to open a socket (OpenShell matches the kernel-resolved binary).
BUILTIN_BINARIES: tuple[str, ...] = (
    "/usr/local/bin/claude",
    "/usr/bin/node",
    "/usr/local/bin/node",
    "/usr/bin/git",
    "/usr/bin/python3",
    "/usr/local/bin/python3",
)


@attrs.frozen
class EgressEntry:
    endpoint: Endpoint
    source: str  # "builtin", "manifest", or "service NAME" (engine plumbing)


@attrs.frozen
class ResolvedEgress:
    entries: tuple[EgressEntry, ...]
    binaries: tuple[str, ...]
    inherit_defaults: bool

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(entry.endpoint for entry in self.entries)

    def describe(self) -> list[str]:
        """One line per entry, for `crucible check` and the capability disclosure."""
        lines = [f"{e.endpoint.spelled()} ({e.source})" for e in self.entries]
        binaries = ", ".join(self.binaries) if self.binaries else "none"
        mode = "built-ins + manifest" if self.inherit_defaults else "manifest only (inherit_defaults = false)"
        return [f"egress {mode}: {len(self.entries)} endpoint(s)", *lines, f"binaries: {binaries}"]


def _dedupe(entries: Iterable[EgressEntry]) -> tuple[EgressEntry, ...]:
    seen: set[tuple[str, int]] = set()
    kept = []
    for entry in entries:
        key = (entry.endpoint.host.lower(), entry.endpoint.port)
        if key in seen:
            continue
        seen.add(key)
        kept.append(entry)
    return tuple(kept)


def resolve_egress(
    table: OpenShellTable,
    service_forwards: Sequence[tuple[str, Endpoint]] = (),
    harness: EgressReach | None = None,
) -> ResolvedEgress:
    manifest = [EgressEntry(e, "manifest") for e in table.parsed_endpoints()]
    builtins = [EgressEntry(e, BUILTIN) for e in BUILTIN_ENDPOINTS] if table.inherit_defaults else []
    needed = [
        EgressEntry(Endpoint(e.host, e.port, e.access), "harness")
        for e in (harness.endpoints if harness is not None else ())
    ]
    plumbing = [EgressEntry(endpoint, f"service {name}") for name, endpoint in service_forwards]
    binaries = [
        *(BUILTIN_BINARIES if table.inherit_defaults else ()),
        *(harness.binaries if harness is not None else ()),
        *table.binaries,
    ]
    return ResolvedEgress(
        _dedupe([*builtins, *manifest, *needed, *plumbing]),
        tuple(dict.fromkeys(binaries)),
        table.inherit_defaults,
    )
