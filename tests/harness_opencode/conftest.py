"""Fixtures for the opencode harness tests: the real CLI (or a skip) and the scripted endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.support import require_cli


@pytest.fixture
def opencode_cli() -> Path:
    return require_cli("opencode")


@pytest.fixture
def fake() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat() as server:
        yield server
