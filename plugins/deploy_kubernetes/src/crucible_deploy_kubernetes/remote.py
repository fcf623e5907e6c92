"""Watching and steering a run that lives in a pod: its log stream rendered by the console reporter,
and control requests carried into the pod over the API's exec stream.

The pod's log is the run's session events (the loop pod runs `crucible run --ui jsonl`, and a
restarted pod first replays the session log it resumes), so `view` renders exactly what a local
console would have shown. Steering runs the same `crucible steer/stop/status` inside the pod,
where the run's loopback control bridge is reachable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

from crucible_core.api import ConsoleReporter
from crucible_deploy_kubernetes import labels as L

RUN_DIR_STATE = "/var/lib/crucible/run/state"


def render_events(lines: Iterable[str], out: TextIO, iterations: int | None) -> int:
    """Feed every session event in `lines` to a console reporter; stop at the session delimiter.

    Returns the number of events shown. Lines that are not events (shell output) are skipped.
    """
    reporter = ConsoleReporter(out, iterations)
    shown = 0
    for line in lines:
        if line.startswith(L.SESSION_DELIMITER):
            break
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("kind"), str):
            reporter.on_event(event)
            shown += 1
    reporter.close()
    return shown


def control_argv(cmd: str, fields: dict[str, Any]) -> list[str]:
    """The in-pod command that sends one control request to the run's bridge."""
    argv = ["crucible", cmd, "--state-dir", RUN_DIR_STATE, "--json"]
    for key, value in fields.items():
        if value is None or key == "text":
            continue
        argv += [f"--{key.replace('_', '-')}", str(value)]
    if fields.get("text") is not None:
        argv += ["--", str(fields["text"])]
    return argv


def iterations_of(pod: Any) -> int | None:
    raw = (pod.metadata.annotations or {}).get(L.ITERATIONS_ANNOTATION)
    return int(raw) if raw and raw.isdigit() else None
