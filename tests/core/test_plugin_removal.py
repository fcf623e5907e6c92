"""Leaving out one plugin's distribution removes exactly its behaviour, and `crucible check` then
names the distribution to install when a manifest asks for what it provided.

One row per directory under plugins/: the plugin set is narrowed to every installed plugin but
that one (as CRUCIBLE_LOAD_PLUGINS does), `crucible plugins --json`'s listing loses that
distribution's names and nothing else's, each of its names asked for by name says which
distribution provides it, and a manifest using one of them fails its check naming it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from crucible_core import api
from crucible_core.cli.plugins_cmd import describe
from crucible_core.plugins import Plugins, load_plugins
from tests.cli_support import EXAMPLES
from tests.services.support import write_catalog

PLUGINS_DIR = Path(__file__).parents[2] / "plugins"
INSTALLED = sorted(ep.name for ep in entry_points(group="crucible"))
# A library the harness plugins share, and the plugin authors' test kit (a pytest plugin): they
# register nothing, so they have no entry point to leave out.
LIBRARIES = {"harness_endpoint", "testkit"}

# (manifest, api.check options) a row's check uses; made in the test's directory.
Case = tuple[Path, dict[str, str]]


def _copy(tmp_path: Path, name: str, edit: Callable[[str], str] = lambda text: text) -> Path:
    shutil.copytree(EXAMPLES / name, tmp_path / name, ignore=shutil.ignore_patterns("workspace", "state"))
    manifest = tmp_path / name / "crucible.toml"
    manifest.write_text(edit(manifest.read_text()))
    return manifest


def _agent(backend: str, harness: str) -> Callable[[Path, pytest.MonkeyPatch], Case]:
    """The counter example with its command proposer replaced by this backend and harness."""

    def edit(text: str) -> str:
        proposer = 'backend = "command"\nagent_cmd = "./bump.sh"'
        assert proposer in text
        return text.replace(proposer, f'backend = "{backend}"\nharness = "{harness}"\n#')

    return lambda tmp_path, _env: (_copy(tmp_path, "counter", edit), {})


def _counter(tmp_path: Path, _env: pytest.MonkeyPatch) -> Case:
    return _copy(tmp_path, "counter"), {}


def _attested_service(tmp_path: Path, env: pytest.MonkeyPatch) -> Case:
    """The service-cluster playbook with its tool attested and its secret granted."""
    env.setenv("CRUCIBLE_SERVICE_CATALOG", str(write_catalog(tmp_path)))
    env.setenv("OUBLIETTE_MCP_TOKEN", "demo-token")
    env.setenv("CRUCIBLE_SERVICE_SECRETS", "OUBLIETTE_MCP_TOKEN")
    return _copy(tmp_path, "service-cluster"), {}


def _unattested_service(tmp_path: Path, env: pytest.MonkeyPatch) -> Case:
    env.delenv("CRUCIBLE_SERVICE_CATALOG", raising=False)
    return _copy(tmp_path, "service-cluster"), {}


def _composite(tmp_path: Path, _env: pytest.MonkeyPatch) -> Case:
    """Two counter domains assembled into one composite."""
    from tests.world_composite.test_composite import make_composite

    return make_composite(tmp_path), {}


def _gpu_judge(tmp_path: Path, _env: pytest.MonkeyPatch) -> Case:
    shutil.copytree(EXAMPLES / "kubernetes", tmp_path / "kubernetes")
    return tmp_path / "kubernetes" / "gpu-judge" / "crucible.toml", {}


# Each plugin directory, and a manifest using one of the names it provides (None: no manifest
# names it; its names are still checked through the registries).
ROWS: dict[str, Callable[[Path, pytest.MonkeyPatch], Case] | None] = {
    "world_git": _counter,
    "judge_command": _counter,
    "backend_local": _counter,
    "backend_openshell": _agent("openshell", "claude"),
    "harness_claude": _agent("local", "claude"),
    "harness_codex": _agent("local", "codex"),
    "harness_acp": _agent("local", "acp"),
    "harness_opencode": _agent("local", "opencode"),
    "harness_pi": _agent("local", "pi"),
    "publish_github": lambda tmp_path, _env: (
        _copy(tmp_path, "counter", lambda text: text + '\n[publish]\npr_repo = "octo/counter"\n'),
        {},
    ),
    "console_rich": lambda tmp_path, _env: (_copy(tmp_path, "counter"), {"ui": "rich"}),
    "workflow_starlark": lambda tmp_path, _env: (_copy(tmp_path, "playbook"), {}),
    "lane_playbook": lambda tmp_path, _env: (_copy(tmp_path, "playbook"), {}),
    "deploy_kubernetes": _gpu_judge,
    "service_transports": _attested_service,
    "service_oubliette": _unattested_service,
    "flow_page": None,  # `crucible flow --out *.html`: tests/core/test_optional_plugins.py
    "broker_mcp": lambda tmp_path, _env: (
        _copy(tmp_path, "counter", lambda text: text + "\n[agent.broker]\nenabled = true\n"),
        {},
    ),
    "search_wide": lambda tmp_path, _env: (
        _copy(tmp_path, "counter", lambda text: text + '\n[search]\nwide = 2\napproaches = ["a", "b"]\n'),
        {},
    ),
    "results_md": None,  # registers no name: RESULTS.md, tests/results_md/test_results_md.py
    "telemetry_otlp": None,  # registers no name, off unless configured: tests/telemetry_otlp/
    "world_composite": _composite,
    "task_agent": lambda tmp_path, _env: (_copy(tmp_path, "playbook"), {}),  # its agent task
    "distress": None,  # `crucible distress` / `escalate` (no manifest names them): tests/distress/
    "packs": None,  # `--pack NAME` (no manifest names it): tests/packs/test_domain_packs.py
    "lane_plan": None,  # `crucible plan run` and `plan show`: tests/lane_plan/test_plan_without_plugin.py
    "run_records": None,  # `--results-bucket` and `crucible fetch`: tests/run_records/test_run_records.py
    "scope": None,  # `crucible scope`: tests/scope/test_scope.py
}


def _without(name: str) -> Plugins:
    return load_plugins(names=[other for other in INSTALLED if other != name])


def test_every_plugin_directory_has_a_row() -> None:
    directories = {path.name for path in PLUGINS_DIR.iterdir() if (path / "pyproject.toml").is_file()}
    assert directories - LIBRARIES == set(ROWS)
    assert set(ROWS) <= set(INSTALLED)  # each is found through its entry point


@pytest.mark.parametrize("name", sorted(ROWS))
def test_leaving_a_plugin_out_removes_exactly_its_behaviour(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = describe(load_plugins(names=INSTALLED))
    listed = {plugin["name"]: plugin for plugin in full["plugins"]}
    distribution = listed[name]["distribution"]
    assert distribution == "crucible-plugin-" + name.replace("_", "-")
    plugins = _without(name)

    # `crucible plugins --json` without it: its entry gone, every other one's names unchanged
    narrowed = describe(plugins)
    assert not narrowed["failures"] and not narrowed["problems"]
    assert [p for p in narrowed["plugins"]] == [p for p in full["plugins"] if p["name"] != name]

    # each name it registered is gone, and asking for it names the distribution to install
    for kind, names in listed[name]["registered"].items():
        registry = plugins.registry(kind)
        for registered in names:
            assert registered not in registry
            assert f"pip install {distribution}" in registry.unknown_message(registered, "the test")

    make = ROWS[name]
    if make is None:
        return
    manifest, options = make(tmp_path, monkeypatch)
    try:
        report = api.check(manifest, plugins=plugins, **options)
    except api.CrucibleError as refused:  # a refusal `crucible check` exits with, before any finding
        text = refused.render()
    else:
        assert report.failed, report.lines
        text = "\n".join(line for _, line in report.lines)
    assert f"pip install {distribution}" in text
