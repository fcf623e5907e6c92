"""Shared fixtures: the real `crucible` CLI (in-process unless a test needs a process) and example copies."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.cli_support import EXAMPLES, crucible_in_process, run_crucible
from tests.session_logs import open_logs

# Hypothesis's deadline and too_slow check time the machine, not the code: with parallel workers
# on a shared machine, one slow draw would fail a test whose properties all hold.
settings.register_profile("crucible", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("crucible")


@pytest.fixture(autouse=True)
def _session_logs_end_with_shutdown(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, every session log under its tmp_path ends with a shutdown (tests/session_logs.py)."""
    # asked for now, so the check runs before tmp_path is torn down
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None or request.node.get_closest_marker("leaves_open_log"):
        return
    left = open_logs(root)
    assert not left, (
        "a session log's last line is not a shutdown (mark the test leaves_open_log if it means to): "
        + "; ".join(left)
    )


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
