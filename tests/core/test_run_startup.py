"""What `crucible run` imports before its first iteration: a command-backend run leaves out what it never uses."""

from __future__ import annotations

import importlib
import json
import pkgutil
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest

import crucible_core
from crucible_core.contract import wire
from tests.cli_support import ROOT, crucible_env

COUNTER = ROOT / "examples" / "counter"

# Loaded only when a diff is written (dulwich.patch brings the email package), when the plugin
# index must be rebuilt (importlib.metadata, stevedore), or when the manifest's [agent] table
# holds a key the chosen drivers do not take (another driver's settings class). Nor what a run
# never needs: html (its entity table; RESULTS.md's chart escapes its own text) and statistics
# (the chart's quartiles are its own), nor the wide round's settings class (no [search] table).
NOT_AT_START = (
    "dulwich.patch",
    "html",
    "html.entities",
    "statistics",
    "crucible_search_wide.settings",
    "email.message",
    "importlib.metadata",
    "stevedore",
    "crucible_backend_openshell.settings",
    "crucible_harness_claude.settings",
    "crucible_harness_codex.settings",
    "crucible_harness_acp.settings",
    "crucible_harness_opencode.settings",
    "crucible_harness_pi.settings",
    "base64",  # the email package's, under the diff writer; redaction needs it for a handed-out value
)
# Never loaded by a run on the built-in iteration graph, however many iterations: the thread
# pool an inline plan executor does not use, the plan file loader of an authored workflow, the
# broker and its mediation point of an agent that can call no tool (until the engine writes an
# output), the domain packs' module for a directory no pack was copied into, and the wire's
# kinds a command agent's run never writes (contract/wire_rare.py: agent events, plans, services...),
# and the flow model's records (the console and RESULTS.md use flow/figures.py).
NOT_IN_A_COUNTER_RUN = (
    "concurrent.futures",
    "crucible_core.plan.load",
    "crucible_broker_mcp.broker",
    "crucible_broker_mcp.mediation",
    "crucible_packs.domain_pack",
    "crucible_core.contract.wire_rare",
    "crucible_core.flow.model",
    "crucible_core.flow.fold",
    *(
        # Nor what only a manifest that declares services, [preflight] rungs or artifacts needs
        # (the services' catalog, resolution, runtime and turn additions, the requirement grammar),
        # what only a resume reads (the log's fold, the recovery's classes, the live-run probe),
        # nor the local backend's turn for a pod (a sandboxed harness sent to a task runner).
        "crucible_core.services.catalog",
        "crucible_core.services.resolve",
        "crucible_core.services.runtime",
        "crucible_core.services.termination",
        "crucible_core.run.service_turns",
        "crucible_core.manifest.semver",
        "crucible_core.toml_text",
        "crucible_core.run.preflight",
        "crucible_core.contract.preflight",
        "crucible_core.artifacts",
        "crucible_core.contract.fold",
        "crucible_core.contract.recovery",
        "crucible_core.run.resume",
        "crucible_core.control.client",
        "crucible_backend_local.pod_turn",
        "secrets",  # the control bridge makes its token from os.urandom itself
        "crucible_core.protocol_records",  # sandboxes', services' and publishers' records
    ),
)


def _modules_after_run(tmp_path: Path, iterations: int) -> list[str]:
    """Run the counter in a fresh interpreter (as the console script does) and list sys.modules.

    A first run writes the plugin index under the test's own cache directory, as an installed
    crucible's first start does; the second one is listed."""
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    for attempt in ("warm", "listed"):
        listed = _run(tmp_path / attempt, iterations, env)
    return list(listed["modules"])


def _run(workdir: Path, iterations: int, env: dict[str, str], *, as_command: bool = True) -> dict[str, Any]:
    """Run the counter to its end in a fresh interpreter; what it imported and what the garbage
    collector was left to look at. `as_command`: main() reads sys.argv, as the console script
    calls it; otherwise main(arguments), as a test or an embedding program calls it."""
    shutil.copytree(COUNTER, workdir, ignore=shutil.ignore_patterns("workspace", "state", "STEER.md"))
    args = ["--manifest", str(workdir / "crucible.toml"), "--iterations", str(iterations)]
    args += ["--no-early-stop", "--ui", "headless"]
    code = textwrap.dedent(
        f"""        import gc, json, linecache, sys
        from crucible_core import plugins
        from crucible_core.cli.main import main
        from crucible_core.lanes import loop
        sys.argv = ["crucible", *{args!r}]
        collections = []  # one entry per collection from main() on
        gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
        loading = plugins.load_plugins
        before_plugins_loaded = []
        def load_plugins(**kwargs):
            try:
                return loading(**kwargs)
            finally:
                before_plugins_loaded.append(len(collections))
        plugins.load_plugins = load_plugins
        baseline = loop.run_baseline
        before_the_baseline = []
        def run_baseline(*args):
            before_the_baseline.append(len(collections))
            return baseline(*args)
        loop.run_baseline = run_baseline
        try:
            main() if {as_command!r} else main({args!r})
        except SystemExit as exit:
            assert not exit.code, exit.code
        found = {{"modules": sorted(sys.modules), "frozen": gc.get_freeze_count(), "collecting": gc.isenabled()}}
        found["collections_before_plugins_loaded"] = before_plugins_loaded[0]
        found["collections_before_the_baseline"] = before_the_baseline[0]
        prefix = "<cattrs generated structure "
        found["structured"] = sorted(name[len(prefix):-1] for name in linecache.cache if name.startswith(prefix))
        print(json.dumps(found), file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


def test_a_command_run_to_its_baseline_imports_no_diff_writer_and_no_other_drivers_settings(
    tmp_path: Path,
) -> None:
    modules = _modules_after_run(tmp_path, 0)
    assert "crucible_world_git.gitworld" in modules  # the listing sees what the run did import
    assert "crucible_backend_local.settings" in modules  # the chosen backend's settings class
    assert [name for name in NOT_AT_START + NOT_IN_A_COUNTER_RUN if name in modules] == []


def test_only_the_manifest_sections_written_get_a_structuring_function(tmp_path: Path) -> None:
    """cattrs generates (and compiles) one function per manifest class; a section the manifest
    does not write, such as [agent.broker] or [capabilities] in the counter's, needs none."""
    structured = _run(tmp_path / "counter", 0, crucible_env())["structured"]
    assert "crucible_core.manifest.models.AgentSection" in structured
    assert "crucible_core.manifest.models.WorkspaceSection" in structured
    unwritten = ("BrokerSection", "CapabilitiesSection", "OutputDeclaration", "WorldSection")
    assert [name for name in structured if name.rsplit(".", 1)[-1] in unwritten] == []


def test_an_iteration_that_describes_its_change_loads_the_diff_writer_then(tmp_path: Path) -> None:
    modules = _modules_after_run(tmp_path, 1)
    assert "dulwich.patch" in modules
    assert [name for name in NOT_IN_A_COUNTER_RUN if name in modules] == []


# Modules other rounds were changing when core's frozen records lost their slots.
SLOTTED_FOR_NOW = (
    "crucible_core.process",
    "crucible_core.run.engine",
    "crucible_core.control.ledger",
    "crucible_core.control.inbox",
    "crucible_core.control.caps",
)


def test_core_s_frozen_records_are_built_without_slots_and_stay_frozen() -> None:
    """attrs builds a slotted class twice; a frozen record refuses every assignment without
    slots (contract/records.py), so each is built once."""
    walked: list[type] = []
    slotted: list[str] = []
    for info in pkgutil.walk_packages(crucible_core.__path__, "crucible_core."):
        if info.name in SLOTTED_FOR_NOW:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            ours = isinstance(value, type) and value.__module__ == module.__name__ and attrs.has(value)
            if ours and getattr(value.__setattr__, "__name__", "") == "_frozen_setattrs":
                walked.append(value)
                if "__slots__" in value.__dict__:
                    slotted.append(f"{module.__name__}.{value.__qualname__}")
    assert len(walked) > 150 and wire.Note in walked
    assert slotted == []
    note = wire.Note(msg="kept")
    for name in ("msg", "anything"):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(note, name, "changed")
    assert note == wire.Note(msg="kept") and hash(note) == hash(wire.Note(msg="kept"))


def test_the_crucible_process_hides_what_start_up_built_from_the_collector_and_a_caller_of_main_keeps_its_own(
    tmp_path: Path,
) -> None:
    """The interpreter's collections at exit walk every object still tracked; the command process
    freezes what its imports, plugins and prepared session built (start_up.py), collecting nothing
    while it imports, and a host process is left alone."""
    env = crucible_env()
    as_command = _run(tmp_path / "command", 0, env)
    assert as_command["frozen"] > 20_000  # the run command's modules and the plugins'
    assert as_command["collecting"]  # collection, off while start-up imported, is back on
    # Off from main()'s start (the supervisor's import brings attrs) to the plugins loaded (the
    # run command's session modules and the plugins'): some twenty collections ran there before.
    assert as_command["collections_before_plugins_loaded"] <= 2
    # Nor while the session is prepared and the run begins (the world's first snapshot imports
    # the git world's modules: some twenty collections there before).
    assert as_command["collections_before_the_baseline"] <= 2
    embedded = _run(tmp_path / "embedded", 0, env, as_command=False)
    assert embedded["frozen"] == 0 and embedded["collecting"]


def test_the_console_script_turns_collection_off_before_the_cli_and_click_are_imported() -> None:
    """The installed `crucible` starts in cli/console_script.py, which turns the collector off
    before `cli.main` (click, inspect, typing...) is imported: about fifteen collections of
    objects that live to the end, before. `--version` only prints: it never collects."""
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "crucible"]
    assert script.value == "crucible_core.cli.console_script:main"
    code = textwrap.dedent(
        """
        import atexit, gc, sys
        collections = []
        gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
        atexit.register(lambda: print("collections", len(collections), file=sys.stderr))

        class SeesClick:
            def find_spec(self, name, path=None, target=None):
                if name == "click":
                    print("click imported, collection", "on" if gc.isenabled() else "off", file=sys.stderr)
                return None

        sys.meta_path.insert(0, SeesClick())
        assert "click" not in sys.modules
        sys.argv = ["crucible", "--version"]
        from crucible_core.cli.console_script import main
        # Importing the console script itself (compiled from source in a fresh checkout) may
        # collect: that is before main(), which is what turns collection off.
        collections.clear()
        main()
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("crucible ")
    assert "click imported, collection off" in done.stderr.splitlines(), done.stderr
    assert done.stderr.strip().splitlines()[-1] == "collections 0", done.stderr
