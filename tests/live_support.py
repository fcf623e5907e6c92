"""Helpers for tests that drive a live `crucible run` subprocess over a small integer-raising domain."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crucible_core.session_log import read_events
from tests.cli_support import CRUCIBLE, crucible_env

MEASURE = """#!/bin/sh
v=$(cat value.txt)
printf '{"valid": true, "score": %s, "solved": false, "note": "value=%s"}\\n' "$v" "$v"
"""

MANIFEST = """
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt propose.sh workspace/"
inject = ["measure.sh"]

[agent]
backend = "command"
agent_cmd = "./propose.sh"
goal = "Raise the integer."

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
"""


def domain(root: Path, proposer: str) -> Path:
    """A manifest whose agent is the shell script `proposer` and whose score is value.txt."""
    (root / "value.txt").write_text("0\n")
    (root / "propose.sh").write_text(proposer)
    (root / "measure.sh").write_text(MEASURE)
    os.chmod(root / "propose.sh", 0o755)
    os.chmod(root / "measure.sh", 0o755)
    (root / "crucible.toml").write_text(MANIFEST)
    return root / "crucible.toml"


def start(manifest: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(CRUCIBLE), "run", "--manifest", str(manifest), "--ui", "headless", *args],
        env=crucible_env(PYTHON=sys.executable, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def events(manifest: Path) -> list[dict[str, Any]]:
    return list(read_events(manifest.parent / "state" / "session.jsonl"))


def wait_for(
    manifest: Path, proc: subprocess.Popen[str], predicate: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """Poll the session log until `predicate(all events)` holds; the run must still be alive."""
    deadline = time.monotonic() + 60
    while not predicate(log := events(manifest)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the expected state"
        time.sleep(0.02)
    return log


def after_last_start(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events the latest process wrote."""
    starts = [i for i, e in enumerate(log) if e["kind"] == "start"]
    return log[starts[-1] :] if starts else []
