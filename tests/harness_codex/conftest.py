"""Fixtures for the codex harness tests: the real CLI (or a skip), the scripted Responses API, a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_responses import FakeResponses
from tests.harness_codex.support import ReachRecorder, codex_cli_path


@pytest.fixture
def codex_cli() -> Path:
    path = codex_cli_path()
    if path is None:
        pytest.skip(
            "the Codex CLI is not installed: `python3 tasks.py test` installs the pinned @openai/codex "
            "into .cache/codex-cli (needs npm), or set CRUCIBLE_TEST_CODEX_CLI"
        )
    return path


@pytest.fixture
def fake() -> Iterator[FakeResponses]:
    with FakeResponses() as server:
        yield server


@pytest.fixture
def reach() -> Iterator[ReachRecorder]:
    recorder = ReachRecorder()
    try:
        yield recorder
    finally:
        recorder.close()


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
