"""Plugin discovery and registries: duplicates, unknown names, broken plugins, narrowing, hook docs."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from crucible_core import hookspecs
from crucible_core.errors import PluginError
from crucible_core.hookspecs import hookimpl
from crucible_core.plugins import LoadFailure, load_plugins, requested_names
from crucible_core.registry import Registry
from tests.cli_support import ROOT, crucible_env, run_crucible


def make_plugin(name: str, **hooks: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def test_duplicate_names_fail_naming_both_plugins() -> None:
    plugins = load_plugins(discover=False)
    for dist in ("crucible-plugin-alpha", "crucible-plugin-beta"):
        plugins.register_module(
            make_plugin(dist, crucible_register_worlds=lambda register: register("git", object)),
            name=dist,
            distribution=dist,
            version="1",
        )
    with pytest.raises(PluginError) as err:
        plugins.registry("world")
    assert "crucible-plugin-alpha" in err.value.render() and "crucible-plugin-beta" in err.value.render()


def test_unknown_name_lists_installed_and_suggests() -> None:
    registry: Registry[object] = Registry("backend")
    registry.add("local", object(), "crucible-plugin-backend-local")
    registry.add("command", object(), "crucible-plugin-backend-local")
    message = registry.unknown_message("locl", "[agent].backend")
    assert "unknown backend 'locl' in [agent].backend" in message
    assert "installed: command, local" in message and "did you mean 'local'?" in message
    assert "pip install" not in message  # a typo of an installed name needs no install hint


def test_a_name_no_plugin_provides_points_at_the_standard_set_not_at_a_plugin() -> None:
    # A name outside the standard set's (registry.PROVIDERS; tests/core/test_plugin_removal.py
    # covers those): the hint is the meta-distribution and the listing.
    registry: Registry[object] = Registry("harness")
    message = registry.unknown_message("my-own-agent", "[agent].harness")
    assert "installed: none" in message
    assert "`pip install crucible` installs the standard plugin set" in message
    assert "`crucible plugins`" in message and "crucible-plugin-" not in message


def test_an_unknown_name_names_the_plugins_that_failed_to_load() -> None:
    plugins = load_plugins(discover=False)
    plugins.failures.append(LoadFailure("broken", "crucible-plugin-broken", "ImportError: no module x"))
    with pytest.raises(PluginError) as err:
        plugins.registry("judge").get("pytest", where="[judge] kind")
    assert "failed to load: crucible-plugin-broken (`crucible plugins` says why)" in err.value.render()


def test_registrations_are_attributed_to_their_plugin() -> None:
    plugins = load_plugins(discover=False)
    plugins.register_module(
        make_plugin("p", crucible_register_judges=lambda register: register("mine", object)),
        name="p",
        distribution="crucible-plugin-mine",
        version="2.0",
    )
    entry = plugins.registry("judge").entries["mine"]
    assert entry.plugin == "crucible-plugin-mine"


def test_installed_standard_plugins_are_discovered() -> None:
    plugins = load_plugins()
    dists = {info.distribution for info in plugins.infos}
    assert {"crucible-core", "crucible-plugin-world-git", "crucible-plugin-judge-command"} <= dists
    assert {"git", "command"} <= set(plugins.registry("world").names())


def test_load_env_narrows_but_always_keeps_core() -> None:
    assert requested_names({"CRUCIBLE_LOAD_PLUGINS": "world_git, judge_command"}) == [
        "core",
        "judge_command",
        "world_git",
    ]
    assert requested_names({}) is None
    plugins = load_plugins(names=requested_names({"CRUCIBLE_LOAD_PLUGINS": "judge_command"}))
    assert {info.name for info in plugins.infos} == {"core", "judge_command"}


def _fake_distribution(site: Path, dist: str, module: str, source: str) -> None:
    # The directory's name is normalized (underscores) as an installer writes it; importlib.metadata
    # takes the part before the first hyphen as the name, so hyphens would make two fakes one.
    info = site / f"{dist.replace('-', '_')}-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[crucible]\n{module} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


def test_a_plugin_that_fails_to_import_is_listed_and_the_cli_still_works(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site, "crucible-plugin-broken", "broken_plugin", "raise ImportError('no such thing')\n"
    )
    env = crucible_env(PYTHONPATH=str(site))
    listing = run_crucible("plugins", "--json", env=env)
    assert listing.returncode == 12, listing.stderr  # listed in full, then a non-zero exit
    report = json.loads(listing.stdout)
    failures = {f["name"]: f for f in report["failures"]}
    assert "broken_plugin" in failures
    assert failures["broken_plugin"]["distribution"] == "crucible-plugin-broken"
    assert "no such thing" in failures["broken_plugin"]["error"]
    assert any(p["distribution"] == "crucible-core" for p in report["plugins"])
    assert run_crucible("help", env=env).returncode == 0


def _listing_with_discovery(env: dict[str, str]) -> tuple[dict[str, object], list[str]]:
    """`crucible plugins --json` in a fresh interpreter, and which of stevedore and
    importlib.metadata it imported."""
    code = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "sys.argv = ['crucible', 'plugins', '--json']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(sorted(m for m in ('stevedore', 'importlib.metadata') if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 12, done.stderr  # the broken plugin makes the listing exit 12
    return json.loads(done.stdout), ast.literal_eval(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("writes_bytecode", [True, False], ids=["bytecode", "no-bytecode"])
def test_the_plugin_index_lists_what_discovery_lists_and_follows_an_install(
    tmp_path: Path, writes_bytecode: bool
) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site, "crucible-plugin-broken", "broken_plugin", "raise ImportError('no such thing')\n"
    )
    env = crucible_env(PYTHONPATH=str(site), CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    # A developer's Python writes bytecode: the first listing's import of the broken plugin makes
    # site/__pycache__, which must not make the index look stale to the second.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not writes_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    discovered, imported = _listing_with_discovery(env)
    assert imported == ["importlib.metadata", "stevedore"]  # no index yet: stevedore discovers
    assert (site / "__pycache__").is_dir() == writes_bytecode
    assert list((tmp_path / "cache").glob("plugin-index-*.json"))
    indexed, imported = _listing_with_discovery(env)
    assert imported == []  # the index answered: no distribution metadata was read
    assert indexed == discovered  # the same plugins, versions, hooks, names and failures
    failures = {f["name"]: f for f in indexed["failures"]}  # type: ignore[attr-defined]
    assert failures["broken_plugin"] == {
        "name": "broken_plugin",
        "distribution": "crucible-plugin-broken",
        "error": "ImportError: no such thing",
    }
    # Installing a distribution changes the fingerprint: it is found, not hidden by the index.
    _fake_distribution(site, "crucible-plugin-added", "added_plugin", "")
    after, imported = _listing_with_discovery(env)
    assert imported == ["importlib.metadata", "stevedore"]
    added = [p for p in after["plugins"] if p["name"] == "added_plugin"]  # type: ignore[attr-defined]
    assert added and added[0]["distribution"] == "crucible-plugin-added" and added[0]["version"] == "0.3"
    # Removing it is followed too (its metadata directory is gone from the fingerprint).
    shutil.rmtree(site / "crucible_plugin_added-0.3.dist-info")
    removed, imported = _listing_with_discovery(env)
    assert imported == ["importlib.metadata", "stevedore"]
    assert not [p for p in removed["plugins"] if p["name"] == "added_plugin"]  # type: ignore[attr-defined]


def _registered_by(env: dict[str, str], plugin: str) -> list[str]:
    listing = subprocess.run(
        [sys.executable, "-m", "crucible_core.cli.main", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert listing.returncode == 0, listing.stderr
    found = [p for p in json.loads(listing.stdout)["plugins"] if p["name"] == plugin]
    return [name for names in found[0]["registered"].values() for name in names] if found else []


def test_the_index_keeps_where_each_plugin_was_found_and_looks_there_first(tmp_path: Path) -> None:
    """The index records the import path entry each plugin's module came from, and the next
    process looks there before walking the whole path (a development install has one entry per
    member); where it is no longer, the path is searched as Python does."""
    from crucible_core.plugin_index import INDEX_STEM

    early, late = tmp_path / "early", tmp_path / "late"
    early.mkdir()
    source = (
        "from crucible_core.hookspecs import hookimpl\n\n"
        "@hookimpl\n"
        "def crucible_register_judges(register):\n"
        "    register({name!r}, object)\n"
    )
    _fake_distribution(late, "crucible-plugin-located", "located_plugin", source.format(name="from-late"))
    env = crucible_env(PYTHONPATH=f"{early}{os.pathsep}{late}", CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    assert _registered_by(env, "located_plugin") == ["from-late"]  # discovered, and indexed
    [index] = (tmp_path / "cache").glob(f"{INDEX_STEM}-*.json")
    locations = json.loads(index.read_text())["locations"]
    assert locations["located_plugin"] == str(late)
    world_git = importlib.util.find_spec("crucible_world_git")
    assert world_git is not None and world_git.origin is not None
    assert Path(locations["crucible_world_git"]) == Path(world_git.origin).parents[1]
    # A module of that name copied into an earlier entry, no distribution installed (the index's
    # fingerprint unchanged): the index's entry is looked in first.
    (early / "located_plugin.py").write_text(source.format(name="from-early"))
    assert _registered_by(env, "located_plugin") == ["from-late"]
    # Gone from the recorded entry: found where Python finds it.
    (late / "located_plugin.py").unlink()
    assert _registered_by(env, "located_plugin") == ["from-early"]


def test_a_recorded_location_that_holds_a_namespace_package_is_left_to_the_whole_path(tmp_path: Path) -> None:
    """A namespace package's portions may lie in several import path entries: the index's entry
    alone would find one of them, so the finder answers only for a package with a loader."""
    from crucible_core.plugins import _IndexedLocations

    (tmp_path / "spread_plugin").mkdir()
    (tmp_path / "whole_plugin").mkdir()
    (tmp_path / "whole_plugin" / "__init__.py").write_text("")
    finder = _IndexedLocations({"spread_plugin": str(tmp_path), "whole_plugin": str(tmp_path)})
    assert finder.find_spec("spread_plugin", None) is None
    found = finder.find_spec("whole_plugin", None)
    assert found is not None and found.origin == str(tmp_path / "whole_plugin" / "__init__.py")
    assert finder.find_spec("whole_plugin", [str(tmp_path)]) is None  # a submodule: not its business
    assert finder.find_spec("unlisted", None) is None


def test_duplicate_world_from_a_third_party_fails_the_run_naming_both(tmp_path: Path, example) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site,
        "crucible-plugin-rival",
        "rival_plugin",
        """
        from crucible_core.hookspecs import hookimpl

        @hookimpl
        def crucible_register_worlds(register):
            register("git", object)
        """,
    )
    manifest = example("counter")
    done = run_crucible("--manifest", manifest, "--iterations", "1", env=crucible_env(PYTHONPATH=str(site)))
    assert done.returncode == 12
    assert "crucible-plugin-rival" in done.stderr and "crucible-plugin-world-git" in done.stderr
    assert "Traceback" not in done.stderr
    # names resolve before anything is created
    assert not (manifest.parent / "state").exists() and not (manifest.parent / "workspace").exists()


def test_a_duplicate_judge_is_listed_marked_and_fails_the_listing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site,
        "crucible-plugin-rival",
        "rival_plugin",
        """
        from crucible_core.hookspecs import hookimpl

        @hookimpl
        def crucible_register_judges(register):
            register("command", object)
            register("rival", object)
        """,
    )
    listing = run_crucible("plugins", env=crucible_env(PYTHONPATH=str(site)))
    assert listing.returncode == 12
    lines = listing.stdout.splitlines()
    # every judge plugin keeps its lines; the clashing name is marked on both
    assert "  judge: command (CONFLICT), task" in lines
    assert "  judge: command (CONFLICT), rival" in lines
    assert any(
        line.startswith("PROBLEM judge 'command' is registered by both")
        and "crucible-plugin-judge-command" in line
        and "crucible-plugin-rival" in line
        for line in lines
    )
    report = json.loads(run_crucible("plugins", "--json", env=crucible_env(PYTHONPATH=str(site))).stdout)
    assert report["conflicts"] == [
        {
            "kind": "judge",
            "name": "command",
            "plugins": ["crucible-plugin-judge-command", "crucible-plugin-rival"],
        }
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "@hookimpl\ndef crucible_register_world(register):\n    register('mine', object)\n",
            "crucible_register_world is marked @hookimpl but crucible has no such hook "
            "(did you mean crucible_register_worlds?)",
        ),
        (
            "def crucible_register_worlds(register):\n    register('mine', object)\n",
            "crucible_register_worlds is not marked with @hookimpl",
        ),
    ],
    ids=["misspelled", "unmarked"],
)
def test_a_hook_that_would_silently_do_nothing_is_a_load_failure(
    tmp_path: Path, source: str, expected: str
) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site,
        "crucible-plugin-typo",
        "typo_plugin",
        "from crucible_core.hookspecs import hookimpl\n\n" + source,
    )
    env = crucible_env(PYTHONPATH=str(site))
    listing = run_crucible("plugins", "--json", env=env)
    assert listing.returncode == 12
    report = json.loads(listing.stdout)
    assert [(f["name"], f["distribution"]) for f in report["failures"]] == [
        ("typo_plugin", "crucible-plugin-typo")
    ]
    assert expected in report["failures"][0]["error"]
    assert "typo_plugin" not in {p["name"] for p in report["plugins"]}


def test_a_misspelled_hook_on_a_fresh_manager_is_refused_and_leaves_no_trace() -> None:
    import pluggy

    plugins = load_plugins(discover=False)
    module = make_plugin("typo", crucible_register_judge=lambda register: register("x", object))
    with pytest.raises(pluggy.PluginValidationError, match="did you mean crucible_register_judges"):
        plugins.register_module(module, name="typo", distribution="crucible-plugin-typo", version="0")
    assert plugins.infos == [] and not plugins.pm.is_registered(module)
    plugins.pm.check_pending()  # nothing unverified is left behind


def test_plugins_table_lists_hooks_and_names() -> None:
    done = run_crucible("plugins")
    assert done.returncode == 0
    assert "crucible-plugin-judge-command" in done.stdout
    assert "judge: command, task" in done.stdout
    assert "crucible_register_judges" in done.stdout


def test_every_hook_has_a_docstring_and_is_documented() -> None:
    tree = ast.parse(Path(hookspecs.__file__).read_text())
    hooks = [
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("crucible_")
    ]
    assert len(hooks) >= 11
    guide = (ROOT / "docs" / "plugins.md").read_text()
    for hook in hooks:
        assert ast.get_docstring(hook), f"{hook.name} has no docstring"
        assert f"`{hook.name}`" in guide, f"{hook.name} is missing from docs/plugins.md"


def test_loading_every_registry_imports_no_heavy_sdk() -> None:
    """Drivers keep SDK imports inside themselves, so `crucible plugins` and start-up stay light."""
    code = (
        "import sys\n"
        "from crucible_core.plugins import REGISTRATION_HOOKS, load_plugins\n"
        "p = load_plugins()\n"
        "[p.registry(kind) for kind in REGISTRATION_HOOKS]\n"
        "heavy = ('grpc', 'kubernetes', 'anthropic', 'mcp', 'uvicorn', 'starlette', 'openshell', 'dulwich', 'starlark', 'rich')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# What drivers use when they run, which listing them must not load: the session log's wire
# records, the console reporter, the supervisor, the manifest loader and models, the Protocols,
# the flow renderers, the command judge and backends, the statistics module, and difflib (only
# a mistyped name's hint needs it).
NOT_FOR_LISTING = (
    "crucible_core.contract.wire",
    "crucible_core.reporters.console",
    "crucible_core.process",
    "crucible_core.manifest.loader",
    "crucible_core.manifest.models",
    "crucible_core.protocols",
    "crucible_flow_page.renderers",
    "crucible_flow_page.cli",
    "crucible_world_git.diff_cmd",
    "crucible_judge_command.judges",
    "crucible_backend_local.backends",
    "statistics",
    "difflib",
)


def test_crucible_plugins_imports_only_what_it_lists() -> None:
    """`crucible plugins` calls every registration hook, yet registers factories, not drivers."""
    code = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "sys.argv = ['crucible', 'plugins']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    print(sorted(m for m in {NOT_FOR_LISTING!r} if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.returncode == 0, done.stderr
    assert "crucible-plugin-judge-command" in done.stdout and "judge: command, task" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


# What listing plugins used to build and now leaves for first use (registered by import path or
# Deferred): the drivers' settings classes, core's task kind, output kind and broker tool specs
# and the init templates (with the plan's field classes and the broker's sections), the distress plugin's records,
# the Kubernetes plugin's click commands, the service transports and the Starlark language; and
# attrs itself, which none of what remains needs.
DEFERRED_AT_LISTING = (
    "attrs",
    "crucible_core.init_templates",
    "crucible_packs.command_template",
    "crucible_packs.domain_pack",
    "crucible_service_transports.transports",
    "crucible_workflow_starlark.language",
    "crucible_harness_claude.templates",
    "crucible_core.plan.kinds",
    "crucible_core.plan.builtin_kinds",
    "crucible_core.broker.outputs",
    "crucible_core.broker.tools",
    "crucible_distress.cli",
    "crucible_distress.pages",
    "crucible_distress.signals",
    "crucible_distress.tools",
    "crucible_broker_mcp.tools",
    "crucible_broker_mcp.kinds",
    "crucible_broker_mcp.broker",
    "crucible_publish_github.kinds",
    "crucible_core.manifest.broker_sections",
    "crucible_deploy_kubernetes.cli",
    "crucible_backend_local.settings",
    "crucible_backend_openshell.settings",
    "crucible_deploy_kubernetes.settings",
    "crucible_harness_acp.settings",
    "crucible_harness_claude.settings",
    "crucible_harness_codex.settings",
    "crucible_harness_opencode.settings",
    "crucible_harness_pi.settings",
    "crucible_world_git.settings",
    "crucible_task_agent.kinds",
    "crucible_judge_command.remote_measure",
)


def test_crucible_plugins_builds_no_settings_class_spec_or_plugin_command() -> None:
    code = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "sys.argv = ['crucible', 'plugins']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    print(sorted(m for m in {DEFERRED_AT_LISTING!r} if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.returncode == 0, done.stderr
    assert "broker tool: request_approval, steer_inbox" in done.stdout
    assert "broker tool: distress, escalate" in done.stdout  # crucible-plugin-distress's
    assert "command: deploy, ps, remote, view" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_core_registers_by_name_exactly_the_kinds_and_tools_it_builds() -> None:
    from crucible_core.plan.builtin_kinds import register_core_kinds

    built: list[str] = []
    register_core_kinds(lambda name, spec, /, **_: built.append(name))
    expected = {
        "task kind": built,
        "output kind": [],  # the broker and forge plugins register the vocabulary
        "broker tool": [],  # the broker and distress plugins register the standard tools
    }
    plugins = load_plugins(names=["core"])
    for kind, names in expected.items():
        registry = plugins.registry(kind)
        assert registry.names() == sorted(names), kind
        for entry in registry:
            assert entry.value.name == entry.name  # the deferred value is the one built under that name
            assert entry.value is entry.value  # built once, then kept


def test_a_deferred_value_loads_on_first_read_and_a_broken_one_names_its_plugin() -> None:
    from crucible_core.registry import Deferred

    calls: list[int] = []
    registry: Registry[object] = Registry("world")
    registry.add("late", Deferred(lambda: calls.append(1) or "built"), "crucible-plugin-late")
    registry.add("path", Deferred("json:dumps"), "crucible-plugin-late")
    registry.add("broken", Deferred("crucible_no_such_plugin.worlds:World"), "crucible-plugin-broken")
    assert calls == [] and registry.names() == ["broken", "late", "path"]
    assert registry.get("late", where="test") == "built" and registry.get("late", where="test") == "built"
    assert calls == [1]
    assert registry.get("path", where="test") is json.dumps
    with pytest.raises(PluginError) as err:
        registry.get("broken", where="test")
    assert "plugin crucible-plugin-broken registered 'broken' from crucible_no_such_plugin.worlds:World" in (
        err.value.render()
    )
    with pytest.raises(ValueError, match="is not an import path"):
        Deferred("json.dumps")


def test_every_driver_kind_is_chosen_by_any_registered_name(tmp_path: Path) -> None:
    from crucible_core.manifest.loader import load_manifest
    from crucible_core.run.drivers import DriverChoice

    manifest = tmp_path / "crucible.toml"
    manifest.write_text(
        '[repo]\npath = "."\n[world]\nkind = "w3"\n[judge]\nkind = "j3"\ndirection = "higher"\n'
        '[agent]\nbackend = "local"\nharness = "h3"\n'
    )
    plugins = load_plugins(discover=False)
    choice = DriverChoice.of(load_manifest(manifest, plugins=plugins), plugins)
    assert (choice.world, choice.judge, choice.backend, choice.harness) == ("w3", "j3", "local", "h3")

    def register_all(kind: str, name: str):
        return lambda register: register(name, object)

    plugins.register_module(
        make_plugin(
            "third",
            crucible_register_worlds=register_all("world", "w3"),
            crucible_register_judges=register_all("judge", "j3"),
            crucible_register_backends=register_all("backend", "local"),
        ),
        name="third",
        distribution="crucible-plugin-third",
        version="0",
    )
    with pytest.raises(PluginError, match=r"unknown harness 'h3' in \[agent\].harness; installed: none"):
        choice.verify(plugins)
    plugins.register_module(
        make_plugin("harness", crucible_register_harnesses=register_all("harness", "h3")),
        name="harness",
        distribution="crucible-plugin-h3",
        version="0",
    )
    choice.verify(plugins)  # every name resolves to the third-party drivers


def test_plugin_commands_show_in_help_and_completion(tmp_path: Path) -> None:
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    shown = run_crucible("--help", env=env)
    assert shown.returncode == 0, shown.stderr
    plugin_part = shown.stdout.split("Commands from plugins:")[1]
    assert {"deploy", "ps", "remote", "view"} <= {
        line.split()[0] for line in plugin_part.splitlines() if line.startswith("  ")
    }
    # one file per interpreter, so installations sharing a cache directory keep their own
    (cached,) = (tmp_path / "cache").glob("plugin-commands-*.json")
    completion = run_crucible(
        env={**env, "_CRUCIBLE_COMPLETE": "bash_complete", "COMP_WORDS": "crucible de", "COMP_CWORD": "1"}
    )
    assert "plain,deploy" in completion.stdout.splitlines()
    # The next --help reads the cache instead of loading every plugin: what it holds is what shows.
    held = json.loads(cached.read_text())
    cached.write_text(
        json.dumps({"key": held["key"], "commands": {"from-the-cache": "Proves the cache is read."}})
    )
    assert "from-the-cache" in run_crucible("--help", env=env).stdout
    # Narrowing the plugin set is another key: the deploy plugin's commands are not listed then.
    narrowed = run_crucible("--help", env={**env, "CRUCIBLE_LOAD_PLUGINS": "judge_command"})  # no commands
    assert "Commands from plugins" not in narrowed.stdout and "deploy" not in narrowed.stdout


def test_a_module_registers_the_implementations_pluggy_would_and_nothing_else() -> None:
    """plugins._Manager passes over a module's non-function values without pluggy's look: a
    function and a bound method still register; a marked callable object does not (pluggy never
    took one), and neither does an imported class or module."""

    class Holder:
        @hookimpl
        def crucible_register_worlds(self, register: Any) -> None:
            register("method-world", object)

    class Callable_:
        def __call__(self, register: Any) -> None:
            register("object-backend", object)

    module = make_plugin(
        "crucible-plugin-mixed", crucible_register_harnesses=lambda register: register("h", object)
    )
    module.crucible_register_worlds = Holder().crucible_register_worlds  # type: ignore[attr-defined]
    module.crucible_register_backends = hookimpl(Callable_())  # type: ignore[attr-defined]
    module.Holder, module.json = Holder, json  # type: ignore[attr-defined]
    plugins = load_plugins(discover=False)
    plugins.register_module(module, name="mixed", distribution="crucible-plugin-mixed", version="1")
    assert plugins.infos[-1].hooks == ("crucible_register_harnesses", "crucible_register_worlds")
    assert "method-world" in plugins.registry("world", strict=False).entries


def test_the_quick_look_at_a_module_reads_every_name_as_pluggy_does() -> None:
    """plugins._Manager reads a module's own plain function's mark itself (pluggy's static look
    costs some 40 us a name): for every name of every installed plugin module, and for marks
    pluggy refuses or finds elsewhere, the answer is pluggy's own."""
    import pluggy

    from crucible_core.plugins import new_manager

    def marked_on_func() -> None: ...

    def not_a_dict() -> None: ...

    def plain() -> None: ...

    class Wrapped:
        pass

    wrapped = Wrapped()
    wrapped.crucible_impl = {"tryfirst": True}  # type: ignore[attr-defined]
    marked_on_func.__func__ = wrapped  # type: ignore[attr-defined]  # pluggy's fallback holder
    not_a_dict.crucible_impl = ["tryfirst"]  # type: ignore[attr-defined]
    odd = types.ModuleType("crucible_odd_plugin")
    for function in (marked_on_func, not_a_dict, plain):
        setattr(odd, function.__name__, function)
    odd.crucible_register_worlds = hookimpl(lambda register: None)  # type: ignore[attr-defined]
    odd.crucible_run_start = hookimpl(tryfirst=True)(lambda ctx: None)  # type: ignore[attr-defined]

    ours = new_manager({})
    pluggys = pluggy.PluginManager(hookspecs.PROJECT)
    modules = [odd, *(sys.modules[info.module] for info in load_plugins().infos)]
    assert len(modules) > 20
    compared = marks = 0
    for module in modules:
        for name in dir(module):
            expected = pluggys.parse_hookimpl_opts(module, name)
            assert ours.parse_hookimpl_opts(module, name) == expected, (module.__name__, name)
            compared += 1
            marks += expected is not None
    assert marks > 50 and compared > 300
    assert ours.parse_hookimpl_opts(odd, "marked_on_func") == {"tryfirst": True}
    assert ours.parse_hookimpl_opts(odd, "not_a_dict") is None


def test_an_observing_hook_reaches_every_plugin_in_pluggys_order_without_pluggys_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[str] = []

    # one function each: pluggy's path finds the one that raised by its code on the traceback
    def first(event: Any) -> None:
        heard.append(f"first {event['kind']}")

    def second(event: Any) -> None:
        heard.append(f"second {event['kind']}")
        raise RuntimeError("dashboard down")

    def third(event: Any) -> None:
        heard.append(f"third {event['kind']}")

    def late(event: Any) -> None:
        heard.append(f"late {event['kind']}")

    def fresh(monitored: bool) -> Any:
        plugins = load_plugins(discover=False)
        for name, hears in (("first", first), ("second", second), ("third", third)):
            module = make_plugin(f"crucible-plugin-{name}", crucible_session_event=hears)
            plugins.register_module(module, name=name, distribution=f"crucible-plugin-{name}", version="1")
        if monitored:
            plugins.pm.add_hookcall_monitoring(lambda *a: None, lambda *a: None)
        return plugins

    def observed(plugins: Any) -> tuple[list[str], list[list[str]]]:
        heard.clear()
        muted: set[object] = set()
        faults = [
            plugins.observe("crucible_session_event", mute=muted, event={"kind": k}) for k in ("a", "b")
        ]
        return list(heard), faults

    via_pluggy = observed(fresh(monitored=True))  # a monitor sees every call: pluggy calls them
    plugins = fresh(monitored=False)
    monkeypatch.setattr(plugins.pm, "_inner_hookexec", None)  # pluggy's executor would fail now
    assert observed(plugins) == via_pluggy
    assert via_pluggy[0] == ["third a", "second a", "first a", "third b", "first b"]  # muted after a
    assert via_pluggy[1] == [
        [
            "plugin crucible-plugin-second: crucible_session_event raised RuntimeError: dashboard down (ignored)"
        ],
        [],
    ]
    # a plugin registered later is heard from then on
    plugins.register_module(
        make_plugin("crucible-plugin-late", crucible_session_event=late),
        name="late",
        distribution="crucible-plugin-late",
        version="1",
    )
    assert observed(plugins)[0][0] == "late a"


def test_a_wrapper_registered_after_an_observing_hook_was_called_wraps_its_next_call() -> None:
    """observe() calls the implementations itself only while no wrapper wraps them: one that
    registers later (after the plan was made) sends the next call through pluggy again."""
    heard: list[str] = []

    def plain(event: Any) -> None:
        heard.append(f"plain {event['kind']}")

    class Wrapping:
        @hookimpl(wrapper=True)
        def crucible_session_event(self, event: Any) -> Any:
            heard.append(f"before {event['kind']}")
            result = yield
            heard.append(f"after {event['kind']}")
            return result

    plugins = load_plugins(discover=False)
    module = make_plugin("crucible-plugin-plain", crucible_session_event=plain)
    plugins.register_module(module, name="plain", distribution="crucible-plugin-plain", version="1")
    assert plugins.observe("crucible_session_event", event={"kind": "a"}) == []
    plugins.pm.register(Wrapping(), name="wrapping")
    assert plugins.observe("crucible_session_event", event={"kind": "b"}) == []
    assert heard == ["plain a", "before b", "plain b", "after b"]


def test_observing_a_firstresult_hook_goes_through_pluggy_and_stops_at_the_first_answer() -> None:
    """The direct path calls every implementation; on a firstresult hook pluggy stops at the first
    that answers, so observe() leaves such a hook to pluggy."""
    called: list[str] = []

    def answering(name: str) -> Any:
        def crucible_domain_packs() -> Any:
            called.append(name)
            return object()

        return crucible_domain_packs

    plugins = load_plugins(discover=False)
    for name in ("one", "two"):
        module = make_plugin(f"crucible-plugin-{name}", crucible_domain_packs=answering(name))
        plugins.register_module(module, name=name, distribution=f"crucible-plugin-{name}", version="1")
    assert plugins.observe("crucible_domain_packs") == []
    assert called == ["two"]  # the last registered is asked first, and its answer ends the call
