"""Fixtures for the openshell backend tests: the test gateway on 127.0.0.1, a workspace, private state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import sandbox_path

PROVIDER_KEY = "sk-ant-api03-provider-key-held-by-the-gateway-0000"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[FakeGateway]:
    root = tmp_path / "gateway"
    root.mkdir()
    with FakeGateway(
        root, path=sandbox_path(), providers={"anthropic": {"PROVIDED_KEY": PROVIDER_KEY}}
    ) as server:
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
