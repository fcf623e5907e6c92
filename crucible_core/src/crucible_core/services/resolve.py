"""Resolving declared services against the catalog and the run's granted secrets, before any dispatch.

A service is available when the catalog attests its tool at an admitted version, the
executable's digest matches, and every secret it names was granted. An unavailable one is
reported by name (the tool or the secret) and its capability is simply not provided, so the
plan's caps rule decides: a required task needing it truncates the plan, an advisory one skips.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping

import attrs

from crucible_core.contract.records import value_methods
from crucible_core.manifest.semver import admits
from crucible_core.manifest.service_declaration import ServiceDeclaration
from crucible_core.services.catalog import TRANSPORTS_DISTRIBUTION, Catalog, CatalogEntry, digest_problem

# Where the engine reads which secrets the operator granted this run: a comma-separated list of
# environment variable names the operator exported for services.
GRANTED_SECRETS_ENV = "CRUCIBLE_SERVICE_SECRETS"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Bounds:
    """The engine's service bounds; printed by check and covered by the identity digest."""

    readiness_seconds: float = 30.0
    restarts: int = 2  # restarts after the first start, per run process
    grace_seconds: float = 5.0


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ResolvedService:
    declaration: ServiceDeclaration
    entry: CatalogEntry | None
    problem: str | None = None  # why it is unavailable; None when it may run

    @property
    def available(self) -> bool:
        return self.problem is None and self.entry is not None

    @property
    def name(self) -> str:
        return self.declaration.name


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Resolution:
    catalog_source: str
    bounds: Bounds
    services: tuple[ResolvedService, ...] = ()

    def available(self) -> frozenset[str]:
        return frozenset(s.declaration.capability for s in self.services if s.available)

    def unavailable(self) -> dict[str, str]:
        return {s.declaration.capability: s.problem or "" for s in self.services if not s.available}

    def by_capability(self, capability: str) -> ResolvedService | None:
        return next((s for s in self.services if s.declaration.capability == capability), None)

    def identity_record(self) -> list[dict[str, object]]:
        """What the run's identity covers for services: never a secret's value, only its name."""
        record: list[dict[str, object]] = []
        for service in self.services:
            entry = service.entry
            record.append(
                {
                    "name": service.name,
                    "tool": service.declaration.tool,
                    "version": entry.version if entry else None,
                    "executable": str(entry.executable) if entry else None,
                    "sha256": entry.sha256 if entry else None,
                    "args": list(service.declaration.args),
                    "secrets": [attrs.asdict(s) for s in service.declaration.secrets],
                    "bounds": attrs.asdict(self.bounds),
                }
            )
        return record

    def digest(self) -> str:
        return _digest(self.identity_record())

    def service_digests(self) -> list[tuple[str, str]]:
        """(name, digest) per declared service, in declaration order: what RunIdentity covers.

        A catalog that attests another version, executable or digest changes the service's digest.
        """
        return [(str(record["name"]), _digest(record)) for record in self.identity_record()]


def _digest(record: object) -> str:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def granted_secrets(env: Mapping[str, str]) -> frozenset[str]:
    names = {name.strip() for name in env.get(GRANTED_SECRETS_ENV, "").split(",")}
    return frozenset(name for name in names if name and name in env)


def resolve(
    declarations: Iterable[ServiceDeclaration],
    catalog: Catalog,
    granted: frozenset[str],
    bounds: Bounds | None = None,
) -> Resolution:
    resolved = []
    for declaration in declarations:
        entry = catalog.entry(declaration.tool)
        problem = None
        if entry is None:
            problem = f"tool {declaration.tool!r} is not attested by the catalog ({catalog.source})"
        elif not admits(declaration.version, entry.version):
            problem = (
                f"tool {declaration.tool!r} is attested at {entry.version}, "
                f"which the requirement {declaration.version!r} does not admit"
            )
        else:
            problem = digest_problem(entry)
        if problem is None:
            missing = [s.name for s in declaration.secrets if s.name not in granted]
            if missing:
                problem = f"secret(s) {', '.join(missing)} not granted to this run ({GRANTED_SECRETS_ENV})"
        resolved.append(ResolvedService(declaration, entry, problem))
    return Resolution(catalog.source, bounds or Bounds(), tuple(resolved))


def transport_problems(resolution: Resolution, served: Collection[str]) -> list[str]:
    """One line per service whose catalog transport no installed plugin serves (`served` names those)."""
    return [
        f"service {s.name}: tool {s.entry.name!r} speaks transport {s.entry.transport.value!r}, which no "
        f"installed plugin serves (pip install {TRANSPORTS_DISTRIBUTION})"
        for s in resolution.services
        if s.entry is not None and s.entry.transport.value not in served
    ]


def describe(resolution: Resolution, needed_by: Mapping[str, list[str]]) -> list[str]:
    """The lines `crucible check` prints: the catalog, the bounds, each service and who needs it."""
    b = resolution.bounds
    lines = [
        f"service catalog: {resolution.catalog_source}",
        f"service bounds: readiness {b.readiness_seconds:g}s, restarts {b.restarts}, grace {b.grace_seconds:g}s",
    ]
    for service in resolution.services:
        entry = service.entry
        tasks = ", ".join(needed_by.get(service.declaration.capability, [])) or "none"
        secrets = (
            ", ".join(f"{s.name} ({s.system}: {s.scope})" for s in service.declaration.secrets) or "none"
        )
        if entry is not None:
            head = (
                f"service {service.name}: tool {entry.name} {entry.version} at {entry.executable}, "
                f"transport {entry.transport.value}"
            )
        else:
            head = f"service {service.name}: tool {service.declaration.tool}"
        state = "available" if service.available else f"UNAVAILABLE: {service.problem}"
        lines.append(f"{head}; secrets {secrets}; needed by {tasks}; {state}")
    return lines
