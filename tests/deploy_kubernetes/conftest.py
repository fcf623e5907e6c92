"""Fixtures for the Kubernetes plugin: a fake API server with a kubeconfig, a fake registry, a profile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
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


def task_profile(tasks_extra: str = "") -> str:
    """A small deploy profile whose cluster serves "gpu" task Jobs; `tasks_extra` follows [tasks]."""
    return (
        '[cluster]\nnamespace = "crucible"\nservice_account = "crucible-loop"\n\n'
        '[image]\nloop = "ghcr.io/example/crucible:0.1"\n\n'
        '[tasks]\ncapabilities = ["gpu"]\nschedule_timeout = 20\n' + tasks_extra
    )


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


@attrs.frozen
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """The real `crucible` entry point, run in this process (the kubernetes import is paid once)."""
    from crucible_core.cli.main import main

    def run(*args: str | Path) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
