"""The openshell backend's settings: validated by its own schema, resolved into the egress the sandbox gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_backend_openshell.egress import BUILTIN_ENDPOINTS, resolve_egress
from crucible_backend_openshell.settings import OpenShellSettings, OpenShellTable
from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import load_manifest

BASE = """
[repo]
path = "."

[agent]
backend = "openshell"
sandbox_image = "ghcr.io/x/sandbox:1"
goal = "g"

[judge]
measure_cmd = "true"
direction = "higher"
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "crucible.toml"
    path.write_text(text)
    return load_manifest(path)


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ManifestError) as err:
        load(tmp_path, text)
    message = err.value.render()
    assert "crucible-plugin-backend-openshell, which registered backend 'openshell'" in message
    return message


def test_the_table_loads_into_the_plugins_settings(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        BASE
        + '[agent.openshell]\ngateway = "gw.internal:8080"\nendpoints = ["pypi.internal:443:read-only"]\n'
        'inherit_defaults = false\n[agent.openshell.timeouts]\nready = "90s"\n',
    )
    settings = loaded.settings.of("backend")
    assert isinstance(settings, OpenShellSettings)
    assert settings.openshell.timeouts.ready == 90.0 and settings.openshell.inherit_defaults is False


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            '[agent.openshell]\nendpoint = ["x:1:full"]\n',
            "unknown key 'endpoint' in [agent.openshell] (did you mean endpoints?)",
        ),
        ('[agent.openshell]\nendpoints = ["x:443"]\n', "is not host:port:access"),
        ('[agent.openshell]\nendpoints = ["x:443:everything"]\n', "access 'everything' is not one of"),
        (
            '[agent.openshell]\ninherit_defaults = "no"\n',
            "[agent.openshell].inherit_defaults: expected true or false",
        ),
        ('[agent.openshell]\ncredentials = "token"\n', 'must be "none", "active-gateway" or "env:NAME"'),
        ('[agent.openshell.timeouts]\nready = "soon"\n', "[agent.openshell.timeouts].ready"),
    ],
)
def test_bad_settings_are_refused_with_the_key_path(tmp_path: Path, extra: str, expected: str) -> None:
    assert expected in refusal(tmp_path, BASE + extra)


def test_sandbox_image_is_required(tmp_path: Path) -> None:
    assert "[agent].sandbox_image is required" in refusal(
        tmp_path, BASE.replace('sandbox_image = "ghcr.io/x/sandbox:1"\n', "")
    )


def test_egress_appends_to_the_builtins_or_replaces_them() -> None:
    extra = ("api.anthropic.com:443:full", "models.internal:8443:read-write")
    inherited = resolve_egress(OpenShellTable(endpoints=extra, binaries=("/opt/bin/tool",)))
    hosts = [(e.host, e.port) for e in inherited.endpoints]
    assert hosts[: len(BUILTIN_ENDPOINTS)] == [(e.host, e.port) for e in BUILTIN_ENDPOINTS]
    assert hosts.count(("api.anthropic.com", 443)) == 1 and ("models.internal", 8443) in hosts
    assert "/opt/bin/tool" in inherited.binaries and "/usr/local/bin/claude" in inherited.binaries
    exact = resolve_egress(OpenShellTable(endpoints=extra, inherit_defaults=False))
    assert [(e.host, e.port) for e in exact.endpoints] == [
        ("api.anthropic.com", 443),
        ("models.internal", 8443),
    ]
    assert exact.binaries == ()
    assert resolve_egress(OpenShellTable(inherit_defaults=False)).endpoints == ()  # a total air-gap is legal


def test_loading_the_plugin_and_its_settings_does_not_import_grpc() -> None:
    import subprocess
    import sys

    code = (
        "import sys, crucible_backend_openshell as p\n"
        "p.crucible_register_backends(register=lambda *a, **k: None)\n"
        "from crucible_backend_openshell.settings import OpenShellSettings\n"
        "OpenShellSettings('img').describe_resolved()\n"
        "print('grpc' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_the_disclosure_lists_the_sandbox_egress_everywhere_it_is_printed(tmp_path: Path) -> None:
    """Core reads the egress through the settings' disclosed_egress() seam (it never imports this
    plugin): exposure, check's lines and the prompt's capabilities section state the same allowlist
    the sandbox is created with."""
    import json

    from crucible_core.broker.service import declaration_for
    from crucible_core.plugins import load_plugins
    from crucible_core.run.prompt import DEFAULT_METHOD, render
    from tests.cli_support import ROOT, run_crucible

    text = BASE + '[agent.openshell]\nendpoints = ["models.internal:8443:read-write"]\n'
    loaded = load(tmp_path, text)
    declaration = declaration_for(load_plugins(), loaded, environ={})
    resolved = resolve_egress(loaded.settings.of("backend").openshell)
    egress = declaration.capabilities.egress
    assert egress.restricted and egress.by == "openshell"
    assert [(e.host, e.port, e.access) for e in egress.endpoints] == [
        (e.host, e.port, e.access) for e in resolved.endpoints
    ]
    assert declaration.capabilities.agent_sandbox is not None
    assert "ghcr.io/x/sandbox:1" in declaration.capabilities.agent_sandbox

    lines = declaration.describe()
    assert "    models.internal:8443 read-write (manifest)" in lines
    assert "    pypi.org:443 read-only (builtin)" in lines
    prompt = render(DEFAULT_METHOD, goal="g", status="", steer="", capabilities="\n".join(lines))
    assert "models.internal:8443 read-write (manifest)" in prompt and "unrestricted" not in prompt

    done = run_crucible("plan", "exposure", "--manifest", tmp_path / "crucible.toml")
    assert done.returncode == 0, done.stderr
    wire = json.loads(done.stdout)["capabilities"]["egress"]
    assert wire["restricted"] is True and wire["by"] == "openshell"
    assert {e["source"] for e in wire["endpoints"]} == {"builtin", "manifest"}  # the spec's labels
    guide = (ROOT / "docs" / "agents.md").read_text()  # says what the disclosure records, as it is
    assert "not on main" not in guide and "labelled\n`builtin` or `manifest`" in guide
    assert {"host": "models.internal", "port": 8443, "access": "read-write", "source": "manifest"} in wire[
        "endpoints"
    ]
    assert len(wire["endpoints"]) == len(BUILTIN_ENDPOINTS) + 1
    assert "/usr/local/bin/claude" in wire["binaries"]

    exact = load(tmp_path, text + "inherit_defaults = false\n")
    only = declaration_for(load_plugins(), exact, environ={}).capabilities.egress
    assert [(e.host, e.source) for e in only.endpoints] == [("models.internal", "manifest")]


def test_an_openshell_agent_gets_no_broker_server_and_a_local_one_does(tmp_path: Path) -> None:
    """openshell vetoes MCP for its harness (the sandbox cannot reach the engine host's loopback);
    the same harness on the local backend, and the command backend, can call MCP tools."""
    from crucible_core.plugins import load_plugins
    from crucible_core.run.drivers import DriverChoice

    plugins = load_plugins()
    boxed = DriverChoice.of(load(tmp_path, BASE), plugins, harness="claude")
    assert not boxed.takes_mcp
    assert boxed.mcp_unreachable(plugins) == (
        "backend openshell cannot hand its agent the engine host's MCP servers"
    )
    local = load(tmp_path, BASE.replace('backend = "openshell"', 'backend = "local"'))
    for harness in ("claude", "anthropic"):
        choice = DriverChoice.of(local, plugins, harness=harness)
        assert choice.takes_mcp and choice.mcp_unreachable(plugins) is None
