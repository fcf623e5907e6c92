"""Fixtures for the Claude harness tests: the real CLI (or a skip), the scripted model server, a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.harness_claude.support import claude_cli_path, model_env


@pytest.fixture
def claude_cli() -> Path:
    path = claude_cli_path()
    if path is None:
        pytest.skip(
            "the Claude Code CLI is not installed: `python3 tasks.py test` installs the pinned "
            "@anthropic-ai/claude-code into .cache/claude-cli (needs npm), or set CRUCIBLE_TEST_CLAUDE_CLI"
        )
    return path


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "value.txt").write_text("1\n")
    return ws


@pytest.fixture
def private_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "private"
    path.mkdir(parents=True, mode=0o700)
    return path


@pytest.fixture
def cli_env(fake: FakeAnthropic, claude_cli: Path, tmp_path: Path) -> dict[str, str]:
    return model_env(fake, tmp_path / "home", CRUCIBLE_CLAUDE_BIN=str(claude_cli))
