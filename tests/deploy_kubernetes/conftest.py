"""Fixtures for the Kubernetes plugin: a fake API server with a kubeconfig, a fake registry, a profile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import EXAMPLES
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_registry import FakeRegistry

EXAMPLE = EXAMPLES / "kubernetes"


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.kubeconfig(tmp_path / "kubeconfig", namespace="crucible")
        yield server


@pytest.fixture
def kubeconfig(fake_api: FakeApiServer, tmp_path: Path) -> Path:
    return tmp_path / "kubeconfig"


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    with FakeRegistry(require_token=True) as reg:
        yield reg


def write_profile(
    directory: Path, text: str | None = None, *, image: str = "ghcr.io/example/crucible:0.1"
) -> Path:
    path = directory / "profile.toml"
    path.write_text(
        text
        if text is not None
        else (EXAMPLE / "profile.toml").read_text().replace("ghcr.io/example/crucible:0.1", image)
    )
    return path
