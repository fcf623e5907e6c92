"""Opening a run's services: declarations, catalog, resolution and the runtime, for `crucible plan run`.

A run id is kept in the state dir so every resumption of the run hands services the same one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from crucible_core.contract import wire
from crucible_core.services.catalog import load_catalog
from crucible_core.services.declaration import ServiceDeclaration, parse_declarations
from crucible_core.services.resolve import Resolution, granted_secrets, resolve
from crucible_core.services.runtime import ServiceRuntime
from crucible_core.session_log import read_events

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
    state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n")
    return run_id


def declarations_of(
    data: Mapping[str, Any], roots: Iterable[Path], source: str
) -> tuple[ServiceDeclaration, ...]:
    return parse_declarations(data.get("service"), forbidden_roots=roots, source=source)


def resolve_declared(declarations: tuple[ServiceDeclaration, ...], env: Mapping[str, str]) -> Resolution:
    return resolve(declarations, load_catalog(env), granted_secrets(env))


def left_running(log_path: Path) -> list[str]:
    """Services an earlier process of this run started and never recorded stopping (it was killed)."""
    running: set[str] = set()
    if not log_path.exists():
        return []
    for event in read_events(log_path):
        if event.get("kind") == wire.ServiceStart.KIND:
            running.add(str(event.get("service")))
        elif event.get("kind") == wire.ServiceExit.KIND:
            running.discard(str(event.get("service")))
    return sorted(running)


def open_runtime(
    resolution: Resolution,
    *,
    state_dir: Path,
    emit: Callable[[wire.Event], object],
    env: Mapping[str, str] | None = None,
) -> ServiceRuntime:
    return ServiceRuntime(
        resolution,
        run_id=stable_run_id(state_dir),
        state_dir=state_dir,
        emit=emit,
        env=dict(os.environ if env is None else env),
    )
