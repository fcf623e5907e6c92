"""Shared fixtures: the real `crucible` CLI (in-process unless a test needs a process) and example copies."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import EXAMPLES, crucible_in_process, run_crucible


@pytest.fixture
def crucible() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the real `crucible` CLI (see `run_crucible`); returns the completed process."""
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


@pytest.fixture(scope="session")
def finished_playbook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/playbook run once to its end, in this process, for the tests that only read it;
    returns its manifest (its log is state/session.jsonl beside it)."""
    folder = tmp_path_factory.mktemp("finished") / "playbook"
    shutil.copytree(EXAMPLES / "playbook", folder, ignore=shutil.ignore_patterns("workspace", "state"))
    manifest = folder / "crucible.toml"
    done = crucible_in_process("run", "--manifest", manifest, "--max-cost", "0.5", "--max-time", "5m")
    assert done.exit_code == 0, done.output
    return manifest
