"""Service tools found through entry points (crucible_register_services) meet the attested catalog:
`crucible services list` shows what plugins installed, `crucible services catalog` writes entries a
run reads, and at run time only that catalog is trusted (ADR-0053)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import crucible_service_oubliette.install
from crucible_core.services.catalog import CATALOG_ENV, Transport, file_sha256, load_catalog
from tests.cli_support import run_crucible
from tests.services.support import TOOL, ScriptedOubliette, env_for, scripted, service_table
from tests.services.test_service_cluster import PLAIN, events

DEPLOY = """
[[task]]
name = "deploy"
kind = "command"
needs = "service.cluster"
retries = 0
command = '''grep -q "server: https://" "$KUBECONFIG" && echo '{"cluster": true}' '''
"""


@pytest.fixture
def oubliette(tmp_path: Path) -> Iterator[ScriptedOubliette]:
    yield from scripted(tmp_path)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin's tool, as if pip had installed its script under tmp_path (so a test may change it)."""
    copy = tmp_path / "bin" / TOOL.name
    copy.parent.mkdir()
    shutil.copy2(TOOL, copy)
    monkeypatch.setattr(crucible_service_oubliette.install, "script_path", lambda _dist: copy)
    return copy


def test_crucible_plugins_lists_the_service_plugins() -> None:
    done = run_crucible("plugins", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    plugins = {p["distribution"]: p for p in json.loads(done.stdout)["plugins"]}
    oubliette = plugins["crucible-plugin-service-oubliette"]
    assert oubliette["name"] == "service_oubliette"
    assert oubliette["registered"] == {"service": ["oubliette-cluster"]}
    transports = plugins["crucible-plugin-service-transports"]["registered"]
    assert transports == {"service transport": ["mcp-http", "mcp-stdio", "http"]}


def test_services_list_shows_the_installed_tool_with_its_plugin_and_executable() -> None:
    done = run_crucible("services", "list")
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("oubliette-cluster")]
    assert line.split()[:3] == ["oubliette-cluster", "crucible-plugin-service-oubliette", str(TOOL.resolve())]
    assert line.endswith("no catalog named (CRUCIBLE_SERVICE_CATALOG)")


def test_a_written_catalog_is_what_a_run_uses_and_a_changed_executable_is_refused(
    tmp_path: Path, installed: Path, oubliette: ScriptedOubliette
) -> None:
    catalog = tmp_path / "catalog.toml"
    written = run_crucible("services", "catalog", "--output", catalog)
    assert written.returncode == 0, written.stdout + written.stderr
    (entry,) = load_catalog({CATALOG_ENV: str(catalog)}).entries  # the format the run reads
    assert (entry.name, entry.executable, entry.sha256) == (
        "oubliette-cluster",
        installed,
        file_sha256(installed),
    )
    assert (entry.transport, entry.creates_external_resources, entry.concurrent_clients) == (
        Transport.MCP_HTTP,
        True,
        True,
    )
    assert entry.handoff is not None and entry.handoff.env == "KUBECONFIG"
    assert run_crucible("services", "catalog").stdout == catalog.read_text()  # stdout: the same document
    env = env_for(tmp_path, catalog)
    listed = run_crucible("services", "list", env=env)
    assert listed.stdout.rstrip().endswith(f"{installed}  attested"), listed.stdout

    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text("version = 1\n[budget]\nusd = 1.0\n" + service_table(oubliette.endpoint) + PLAIN + DEPLOY)
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    deploy = next(e for e in events(tmp_path / "state", "task_result") if e["task"] == "deploy")
    assert deploy["output"] == {"cluster": True}
    assert [e["service"] for e in events(tmp_path / "state", "service_ready")] == ["cluster"]

    # The installed tool changes underneath the catalog: the registration still names it, but the
    # run trusts only the catalog's sha256 and refuses to start it.
    installed.write_text(installed.read_text() + "\n# changed after the operator attested it\n")
    listed = run_crucible("services", "list", env=env)
    assert listed.stdout.rstrip().endswith("the catalog pins another sha256"), listed.stdout
    checked = run_crucible("check", "--plan", plan, cwd=tmp_path, env=env)
    assert checked.returncode == 13, checked.stdout + checked.stderr
    assert "does not match its catalog sha256" in checked.stdout
    shutil.rmtree(tmp_path / "state")
    refused = run_crucible(
        "plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env
    )
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "truncated" in refused.stdout and "does not match its catalog sha256" in refused.stdout
    assert events(tmp_path / "state", "service_start") == []


def test_a_registered_tool_the_catalog_does_not_list_is_not_attested(tmp_path: Path, installed: Path) -> None:
    catalog = tmp_path / "catalog.toml"
    catalog.write_text("tool = []\n")
    env = env_for(tmp_path, catalog)
    listed = run_crucible("services", "list", env=env)
    assert listed.stdout.rstrip().endswith(f"{installed}  not in the catalog"), listed.stdout
    plan = tmp_path / "plan.toml"
    plan.write_text("version = 1\n[budget]\nusd = 1.0\n" + service_table("http://127.0.0.1:9/mcp") + DEPLOY)
    checked = run_crucible("check", "--plan", plan, cwd=tmp_path, env=env)
    assert checked.returncode == 13
    assert "tool 'oubliette-cluster' is not attested by the catalog" in checked.stdout


def test_catalog_refuses_a_tool_no_plugin_installed(tmp_path: Path) -> None:
    done = run_crucible("services", "catalog", "oubliette-clustr", "--output", tmp_path / "c.toml")
    assert done.returncode == 12
    assert "oubliette-clustr" in done.stderr and "oubliette-cluster" in done.stderr
    assert not (tmp_path / "c.toml").exists()
