"""Shared fixtures: the real `crucible` CLI as a subprocess, and copies of the examples to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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


@pytest.fixture
def crucible() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed `crucible` CLI; returns the completed process."""
    return run_crucible


@pytest.fixture
def example(tmp_path: Path) -> Callable[[str], Path]:
    """Copy examples/<name> into a temp dir (without run leftovers) and return its manifest."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(
            EXAMPLES / name,
            target,
            ignore=shutil.ignore_patterns("workspace", "state", "STEER.md", "__pycache__"),
        )
        return target / "crucible.toml"

    return copy
