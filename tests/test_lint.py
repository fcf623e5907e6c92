"""The code stays ruff-clean and type-checked: lint, format and mypy --strict run with the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import ROOT

BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = str(BIN / name) if (BIN / name).exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (python3 tasks.py test installs it)")
    return found


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    done = subprocess.run([_tool("ruff"), *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    """crucible_core and every standard plugin pass mypy --strict ([tool.mypy] in pyproject.toml)."""
    done = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (
        "mypy --strict found type errors (run `python3 tasks.py lint` to see them; "
        "docs/plugins.md says how to fix them):\n" + done.stdout + done.stderr
    )
