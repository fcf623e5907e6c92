"""Opening a run's services: declarations, catalog, resolution and the runtime, for every kind of run.

`crucible plan run`, a playbook and the loop share one order: resolve before the session log
opens (a broken catalog is refused with nothing recorded), run the services while the run
runs, and on every way out reclaim what a killed predecessor left and stop what this process
started. A run id is kept in the state dir so every resumption hands services the same one.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from crucible_core.contract import wire
from crucible_core.contract.records import value_methods
from crucible_core.errors import PluginError, RunFailed
from crucible_core.manifest.service_declaration import (
    CAPABILITY_PREFIX,
    ServiceDeclaration,
    parse_declarations,
)
from crucible_core.redact import Redactor
from crucible_core.session_log import read_events

# The catalog, the resolution and the runtime are imported where a run declares a service: most
# runs declare none, and their modules (attrs records, the catalog's TOML reading) cost every
# start a few milliseconds for nothing.
if TYPE_CHECKING:
    from crucible_core.plugins import Plugins
    from crucible_core.protocols import ServiceTransport
    from crucible_core.registry import Registry
    from crucible_core.services.resolve import Resolution
    from crucible_core.services.runtime import ServiceRuntime

RUN_ID_FILE = "run_id"


def stable_run_id(state_dir: Path) -> str:
    """This run's id: made once, then read back by every resumption."""
    path = state_dir / RUN_ID_FILE
    try:
        found = path.read_text().strip()
        if found:
            return found
    except OSError:
        pass
    run_id = uuid.uuid4().hex[:16]
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(run_id + "\n")
    return run_id


def declarations_of(
    data: Mapping[str, Any], roots: Iterable[Path], source: str
) -> tuple[ServiceDeclaration, ...]:
    return parse_declarations(data.get("service"), forbidden_roots=roots, source=source)


def resolve_declared(declarations: tuple[ServiceDeclaration, ...], env: Mapping[str, str]) -> Resolution:
    from crucible_core.services.catalog import load_catalog
    from crucible_core.services.resolve import granted_secrets, resolve

    return resolve(declarations, load_catalog(env), granted_secrets(env))


def left_running(log_path: Path) -> list[str]:
    """Services an earlier process of this run started and never recorded stopping (it was killed),
    and whose leftovers no later reclaim command cleaned up."""
    running: set[str] = set()
    if not log_path.exists():
        return []
    for event in read_events(log_path):  # the kinds by their wire names (see contract/wire_rare.py)
        kind = event.get("kind")
        if kind == "service_start":
            running.add(str(event.get("service")))
        elif kind == "service_exit" or (kind == "service_reclaim" and event.get("status") == 0):
            running.discard(str(event.get("service")))
    return sorted(running)


def open_runtime(
    resolution: Resolution,
    *,
    state_dir: Path,
    emit: Callable[[wire.Event], object],
    transports: Mapping[str, ServiceTransport],
    env: Mapping[str, str] | None = None,
    run_id: str | None = None,
) -> ServiceRuntime:
    from crucible_core.services.runtime import ServiceRuntime

    return ServiceRuntime(
        resolution,
        run_id=run_id or stable_run_id(state_dir),
        state_dir=state_dir,
        emit=emit,
        env=dict(os.environ if env is None else env),
        transports=transports,
    )


def served_transports(
    resolution: Resolution, registry: Registry[ServiceTransport]
) -> dict[str, ServiceTransport]:
    """The plugins serving the resolved services' transports; a transport none serves refuses the run."""
    from crucible_core.services.catalog import TRANSPORTS_DISTRIBUTION
    from crucible_core.services.resolve import transport_problems

    problems = transport_problems(resolution, registry.names())
    if problems:
        raise PluginError(
            "; ".join(problems),
            hint=f"pip install {TRANSPORTS_DISTRIBUTION} (`crucible plugins` lists the transports installed)",
        )
    return {entry.name: entry.value for entry in registry}


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class PlannedServices:
    """What a run settles about its services before its log opens."""

    declared: tuple[ServiceDeclaration, ...]
    resolution: Resolution | None  # None: the run declares no service
    leftover: tuple[str, ...] = ()  # started by a killed predecessor and never recorded stopping
    transports: Mapping[str, ServiceTransport] = attrs.field(factory=dict)  # catalog name -> plugin

    def secret_names(self) -> frozenset[str]:
        return frozenset(secret.name for service in self.declared for secret in service.secrets)

    def task_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment tasks and agent turns may see: a service's secrets reach only the service."""
        secrets = self.secret_names()
        return {key: value for key, value in env.items() if key not in secrets}

    def secret_values(self, env: Mapping[str, str]) -> list[str]:
        """The values a redactor must mask: the declared secrets the operator exported."""
        return [env[name] for name in sorted(self.secret_names()) if env.get(name)]

    def redactor(self, env: Mapping[str, str]) -> Redactor | None:
        """A session-log redactor masking the services' secrets (None when none are declared)."""
        values = self.secret_values(env)
        if not values:
            return None
        redactor = Redactor()
        redactor.add(values)
        return redactor

    def open(
        self,
        *,
        state_dir: Path,
        emit: Callable[[wire.Event], object],
        run_id: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ServiceRuntime | None:
        """The runtime for this process (None when nothing is declared); nothing starts until needed."""
        if self.resolution is None:
            return None
        return open_runtime(
            self.resolution,
            state_dir=state_dir,
            emit=emit,
            transports=self.transports,
            env=env,
            run_id=run_id,
        )

    def shut(self, runtime: ServiceRuntime | None) -> None:
        """Reclaim what a killed predecessor left (when this process never restarted it), stop the rest."""
        if runtime is None:
            return
        try:
            runtime.reclaim(list(self.leftover))
        finally:
            runtime.close()

    @contextlib.contextmanager
    def serving(
        self,
        *,
        state_dir: Path,
        emit: Callable[[wire.Event], object],
        run_id: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Iterator[ServiceRuntime | None]:
        """The runtime while the run runs (None when nothing is declared); stopped on every way out,
        a SIGTERM included (services/termination.py)."""
        from crucible_core.services.termination import services_stop_on_sigterm

        runtime = self.open(state_dir=state_dir, emit=emit, run_id=run_id, env=env)
        try:
            with services_stop_on_sigterm(runtime):
                yield runtime
        finally:
            self.shut(runtime)

    def refuse_unavailable(self, names: Iterable[str]) -> None:
        """Agent turns cannot be truncated like a task: a service they need and cannot have refuses the run."""
        if self.resolution is None:
            return
        problems = [
            f"service {name}: {why}"
            for name in names
            for capability, why in self.resolution.unavailable().items()
            if capability == CAPABILITY_PREFIX + name
        ]
        if problems:
            raise RunFailed(
                "[agent].services names a service this run cannot have: " + "; ".join(problems),
                hint="attest its tool in the catalog (CRUCIBLE_SERVICE_CATALOG) and grant its secrets "
                "(CRUCIBLE_SERVICE_SECRETS); `crucible check` shows the resolution",
            )


def plan_services(
    declared: tuple[ServiceDeclaration, ...],
    env: Mapping[str, str],
    *,
    log_path: Path,
    resumed: bool,
    plugins: Plugins,
) -> PlannedServices:
    """Resolve the declared services (reads the catalog; a broken one is refused here), find the
    plugins serving their transports (a missing one is refused here too) and find leftovers."""
    if not declared:
        return PlannedServices(declared, None)
    resolution = resolve_declared(declared, env)
    transports = served_transports(resolution, plugins.registry("service transport"))
    leftover = tuple(left_running(log_path)) if resumed else ()
    return PlannedServices(declared, resolution, leftover, transports)
