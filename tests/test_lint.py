"""The code stays ruff-clean: lint and format checks run with the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import ROOT

RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff(args: list[str]) -> None:
    ruff = str(RUFF) if RUFF.exists() else shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (python3 tasks.py test installs it)")
    done = subprocess.run([ruff, *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
