"""crucible-plugin-backend-openshell: the `openshell` backend, agent turns in OpenShell sandboxes.

Only hook implementations live here; the backend, the SDK and grpc load when a turn first
runs, so listing plugins or checking a manifest never imports grpc.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from crucible_core.api import hookimpl

if TYPE_CHECKING:
    from crucible_core.api import AgentBackend, BackendContext, BackendFactory, Register, RunContext, RunEnd

BACKEND = "openshell"


def _openshell(ctx: BackendContext) -> AgentBackend:
    from crucible_backend_openshell.backend import OpenShellBackend

    return OpenShellBackend.from_context(ctx)


@hookimpl
def crucible_register_backends(register: Register[BackendFactory]) -> None:
    # takes_mcp=False: the sandbox cannot reach a server on the engine host's loopback (the
    # broker's), so a run here starts none; run services reach it through gateway forwards.
    register(
        BACKEND,
        _openshell,
        settings="crucible_backend_openshell.settings:OpenShellSettings",
        runs_harness=True,
        takes_mcp=False,
    )


def _settings_of(context: RunContext) -> Any:
    manifest = context.manifest
    if manifest is None or manifest.manifest.agent.backend != BACKEND:
        return None  # a plan file has no manifest, so no openshell backend
    return manifest.settings.of("backend")


def _sweep(settings: Any, run_id: str) -> list[str]:
    """Delete every sandbox labelled with the run id; a gateway that cannot be reached is left for later."""
    from crucible_backend_openshell.gateway import Gateway

    gateway = Gateway(settings.openshell)
    try:
        return gateway.sweep(run_id)
    finally:
        gateway.close()


@hookimpl
def crucible_run_start(context: RunContext) -> None:
    settings = _settings_of(context)
    if settings is None:
        return
    from crucible_backend_openshell import runs

    runs.started(context.private_dir, context.run_id)
    if context.resumed:
        # A predecessor killed mid-turn (SIGKILL: no run end) may have left its sandbox running.
        with contextlib.suppress(Exception):
            _sweep(settings, context.run_id)


@hookimpl
def crucible_run_end(end: RunEnd) -> None:
    settings = _settings_of(end.run)
    if settings is None:
        return
    from crucible_backend_openshell import runs

    try:
        _sweep(settings, end.run.run_id)
    finally:
        runs.ended(end.run.private_dir)
