"""The workflow-language seam: a source beside a manifest is compiled by the language registered
for its suffix; with none installed for it, check, run and workflow refuse naming what to install."""

from __future__ import annotations

import json
import shutil
import types
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from crucible_core.errors import ManifestError, PluginError
from crucible_core.hookspecs import hookimpl
from crucible_core.manifest.loader import load_manifest
from crucible_core.plugins import Plugins, load_plugins
from crucible_core.workflow.pack import declared_lane, declared_params, effective_workflow
from tests.cli_support import EXAMPLES, crucible_env, run_crucible

STARLARK_HINT = "pip install crucible-plugin-workflow-starlark"


def without_starlark() -> dict[str, str]:
    """The environment of a machine where every installed plugin but the Starlark language is."""
    names = sorted(ep.name for ep in entry_points(group="crucible") if ep.name != "workflow_starlark")
    return crucible_env(CRUCIBLE_LOAD_PLUGINS=",".join(names))


@pytest.mark.parametrize(
    "command",
    [
        ("check",),
        ("run", "--max-cost", "1", "--max-time", "1m"),
        ("workflow", "compile"),
        ("workflow", "params"),
        ("plan", "show", "--manifest", "crucible.toml"),
    ],
)
def test_a_workflow_star_without_its_language_is_refused_naming_the_plugin(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    pack = tmp_path / "playbook"
    shutil.copytree(EXAMPLES / "playbook", pack)
    done = run_crucible(*command, cwd=pack, env=without_starlark())
    assert done.returncode == 12, done.stdout + done.stderr
    assert STARLARK_HINT in done.stderr and "workflow.star" in done.stderr
    assert not (pack / "state").exists() and not (pack / "workspace").exists()  # nothing was made
    # the same pack with the plugin installed compiles: only the plugin's behaviour went away
    assert run_crucible("workflow", "compile", cwd=pack).returncode == 0


def test_a_manifests_own_workflow_tables_need_no_language_plugin(tmp_path: Path) -> None:
    (tmp_path / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n[[workflow.task]]\nname = "hello"\nkind = "command"\n'
        'command = "true"\n'
    )
    done = run_crucible("workflow", "compile", "--format", "json", cwd=tmp_path, env=without_starlark())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["task"] == [{"name": "hello", "kind": "command", "command": "true"}]


def _read(source: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(source.read_text())
    return document


class JsonWorkflow:
    """A third-party language: the [workflow] document as JSON, one declared parameter."""

    def __init__(self) -> None:
        self.compiled: list[dict[str, str]] = []

    def lane(self, source: Path) -> str:
        return str(_read(source)["type"])

    def params(self, source: Path) -> dict[str, Any]:
        return {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}

    def compile(self, source: Path, supplied: Mapping[str, str]) -> dict[str, Any]:
        self.compiled.append(dict(supplied))
        return _read(source)


def _plugins_with(suffix: str, language: object) -> Plugins:
    """The installed plugins plus one more that registers `language` under `suffix`."""
    plugins = load_plugins()
    module = types.ModuleType("crucible_json_lang")
    module.crucible_register_workflow_languages = hookimpl(  # type: ignore[attr-defined]
        lambda register: register(suffix, language)
    )
    plugins.register_module(module, name="json_lang", distribution="crucible-plugin-json-lang", version="0")
    return plugins


def _pack(tmp_path: Path) -> Path:
    manifest = tmp_path / "crucible.toml"
    manifest.write_text(
        '[workflow]\ntype = "playbook"\n[agent]\nbackend = "command"\nagent_cmd = "true"\ngoal = "g"\n'
    )
    document = {"type": "playbook", "task": [{"name": "hello", "kind": "command", "command": "true"}]}
    (tmp_path / "workflow.json").write_text(json.dumps(document))
    return manifest


def test_a_registered_language_compiles_the_source_beside_the_manifest(tmp_path: Path) -> None:
    language = JsonWorkflow()
    plugins = _plugins_with(".json", language)
    loaded = load_manifest(_pack(tmp_path), plugins=plugins)
    assert declared_lane(plugins, loaded) == "playbook"
    assert declared_params(plugins, loaded)["required"] == ["who"]
    document = effective_workflow(plugins, loaded, {"who": "me"})
    assert document == {"type": "playbook", "task": [{"name": "hello", "kind": "command", "command": "true"}]}
    assert language.compiled == [{"who": "me"}]
    assert "json" in plugins.registry("workflow language").entries[".json"].plugin


def test_two_sources_or_a_lane_that_is_no_workflow_type_are_refused(tmp_path: Path) -> None:
    plugins = _plugins_with(".json", JsonWorkflow())
    manifest = _pack(tmp_path)
    (tmp_path / "workflow.star").write_text('workflow(type = "playbook", tasks = [])\n')
    with pytest.raises(ManifestError, match=r"workflow.json and workflow.star both define the workflow"):
        effective_workflow(plugins, load_manifest(manifest, plugins=plugins))
    (tmp_path / "workflow.star").unlink()
    (tmp_path / "workflow.json").write_text(json.dumps({"type": "playbok", "task": []}))
    with pytest.raises(PluginError, match=r"read the lane 'playbok' from workflow.json"):
        declared_lane(plugins, load_manifest(manifest, plugins=plugins))


def test_a_language_registered_under_no_file_suffix_is_refused_naming_its_plugin(tmp_path: Path) -> None:
    plugins = _plugins_with("../json", JsonWorkflow())
    with pytest.raises(
        PluginError, match=r"plugin crucible-plugin-json-lang registered workflow language '../json'"
    ):
        effective_workflow(plugins, load_manifest(_pack(tmp_path), plugins=plugins))
