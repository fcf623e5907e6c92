"""Which run this process is executing, and which sandboxes it has open: what the lifecycle hooks share.

The engine builds the backend before the run's id is known to plugins; `crucible_run_start`
records the id here (keyed by the run's private state directory, which the backend also
knows), and every sandbox a turn creates is labelled with it. `crucible_run_end` deletes
whatever is still open, and on resume `crucible_run_start` first deletes any sandbox a
killed predecessor left with the same label.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

_lock = threading.Lock()
_run_ids: dict[Path, str] = {}
_open: dict[str, set[str]] = {}  # run id -> sandbox names not yet deleted


def started(private_dir: Path, run_id: str) -> None:
    with _lock:
        _run_ids[private_dir.resolve()] = run_id


def ended(private_dir: Path) -> None:
    with _lock:
        run_id = _run_ids.pop(private_dir.resolve(), None)
        if run_id is not None:
            _open.pop(run_id, None)


def run_id_for(private_dir: Path) -> str:
    """The run's id; outside a run (a direct test) a fresh one, remembered for the directory."""
    with _lock:
        key = private_dir.resolve()
        if key not in _run_ids:
            _run_ids[key] = "adhoc-" + uuid.uuid4().hex[:12]
        return _run_ids[key]


def opened(run_id: str, name: str) -> None:
    with _lock:
        _open.setdefault(run_id, set()).add(name)


def closed(run_id: str, name: str) -> None:
    with _lock:
        _open.get(run_id, set()).discard(name)


def still_open(run_id: str) -> list[str]:
    with _lock:
        return sorted(_open.get(run_id, set()))
