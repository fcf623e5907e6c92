"""The broker plugin registers by name exactly the tools and output kinds it builds, and core
without it runs a manifest that does not ask for the broker, and refuses one that does, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.broker.service import declaration_for
from crucible_core.errors import ManifestError
from crucible_core.manifest.loader import load_manifest
from crucible_core.plugins import load_plugins
from tests.core.test_manifest import BASE  # the smallest command-agent manifest


@pytest.mark.parametrize(
    ("plugin", "kind", "module", "attribute"),
    [
        ("broker_mcp", "broker tool", "crucible_broker_mcp.tools", "BUILTIN_TOOLS"),
        ("broker_mcp", "output kind", "crucible_broker_mcp.kinds", "KINDS"),
        ("publish_github", "output kind", "crucible_publish_github.kinds", "KINDS"),
    ],
)
def test_each_plugin_registers_by_name_exactly_what_it_builds(
    plugin: str, kind: str, module: str, attribute: str
) -> None:
    import importlib

    built = getattr(importlib.import_module(module), attribute)
    registry = load_plugins(names=[plugin]).registry(kind)
    assert registry.names() == sorted(item.name for item in built)
    for entry in registry:
        assert entry.value.name == entry.name  # the deferred value is the one built under that name
        assert entry.value is entry.value  # built once, then kept


def _without_broker() -> object:
    from importlib.metadata import entry_points

    return load_plugins(names=[ep.name for ep in entry_points(group="crucible") if ep.name != "broker_mcp"])


@pytest.mark.parametrize(
    "extra",
    [
        "[agent.broker]\nenabled = true\n",
        '[agent.broker]\ntools = ["distress"]\n',
        '[outputs.tracker-comment]\ncount = 1\ntarget = { fixed = "PROJ-1" }\n',
    ],
)
def test_without_the_plugin_a_manifest_asking_for_the_broker_is_refused_naming_it(
    tmp_path: Path, extra: str
) -> None:
    path = tmp_path / "crucible.toml"
    path.write_text(BASE + extra)
    with pytest.raises(ManifestError) as refused:
        declaration_for(_without_broker(), load_manifest(path), environ={})
    assert "pip install crucible-plugin-broker-mcp" in refused.value.render()


def test_without_the_plugin_a_manifest_not_asking_resolves_with_no_tools_and_publish_is_refused(
    tmp_path: Path,
) -> None:
    from crucible_core.run.publish import build_publisher

    path = tmp_path / "crucible.toml"
    path.write_text(BASE)
    plugins = _without_broker()
    declaration = declaration_for(plugins, load_manifest(path), environ={})
    assert declaration.capabilities.broker_tools == ()
    assert [o.kind for o in declaration.outputs] == ["draft-pr", "run-record", "workflow-dispatch"]
    assert "broker tools: none (no broker)" in declaration.prompt_text()
    path.write_text(BASE + '[publish]\npr_repo = "octo/counter"\n')
    publish = load_manifest(path).manifest.publish
    assert publish is not None
    with pytest.raises(ManifestError) as refused:
        build_publisher(plugins, publish)  # type: ignore[arg-type]
    assert "pip install crucible-plugin-broker-mcp" in refused.value.render()


def test_without_the_plugin_a_command_run_goes_as_before_and_one_asking_is_refused(example) -> None:
    from importlib.metadata import entry_points

    from crucible_core.session_log import read_events
    from tests.cli_support import crucible_env, run_crucible

    path = example("counter")
    others = ",".join(ep.name for ep in entry_points(group="crucible") if ep.name != "broker_mcp")
    done = run_crucible(
        "--manifest",
        path,
        "--iterations",
        "2",
        "--ui",
        "headless",
        env=crucible_env(CRUCIBLE_LOAD_PLUGINS=others),
    )
    assert done.returncode == 0, done.stderr
    events = list(read_events(path.parent / "state" / "session.jsonl"))
    (exposure,) = [e for e in events if e["kind"] == "exposure"]
    assert exposure["capabilities"]["broker_tools"] == []
    assert not any(e["kind"] in ("broker_call", "broker_result") for e in events)
    assert len([e for e in events if e["kind"] == "row"]) >= 2  # the baseline and the iterations
    import shutil

    for left in ("workspace", "state"):  # a fresh run of the same pack, now asking for a tool
        shutil.rmtree(path.parent / left)
    with path.open("a") as handle:
        handle.write('\n[agent.broker]\ntools = ["distress"]\n')
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=others)
    check = run_crucible("check", "--manifest", path, env=env)
    assert check.returncode == 13 and "pip install crucible-plugin-broker-mcp" in check.stdout, check.stdout
    asked = run_crucible("run", "--manifest", path, "--iterations", "1", "--ui", "headless", env=env)
    assert asked.returncode == 10 and "pip install crucible-plugin-broker-mcp" in asked.stderr, asked.stderr
