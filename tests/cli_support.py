"""Helpers for driving the real `crucible` CLI from tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CRUCIBLE = Path(sys.executable).parent / "crucible"


def crucible_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
    env.update(extra)
    return env


def run_crucible(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CRUCIBLE), *(str(a) for a in args)],
        cwd=cwd,
        env=env or crucible_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
