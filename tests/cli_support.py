"""Helpers for driving the real `crucible` CLI from tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click.testing

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


def crucible_in_process(*args: str | Path) -> click.testing.Result:
    """The real `crucible` command group run in this process (click's CliRunner captures what it
    prints): for tests where a separate process is not what is being tested."""
    from crucible_core.cli.main import cli

    return click.testing.CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
