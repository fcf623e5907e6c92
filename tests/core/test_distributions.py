"""Packaging: crucible-core installed alone (not editable) imports, lists its plugins and carries
the guides for `crucible help`; `crucible` is a real meta-distribution of the standard set;
every distribution names where its docs and source live."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import pytest

from tests.cli_support import ROOT, crucible_env, run_crucible

PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation"]
STANDARD_SET = {
    "crucible-core",
    "crucible-plugin-world-git",
    "crucible-plugin-judge-command",
    "crucible-plugin-backend-local",
    "crucible-plugin-backend-openshell",
    "crucible-plugin-harness-claude",
    "crucible-plugin-harness-codex",
    "crucible-plugin-harness-acp",
    "crucible-harness-endpoint",
    "crucible-plugin-harness-opencode",
    "crucible-plugin-harness-pi",
    "crucible-plugin-deploy-kubernetes",
    "crucible-plugin-broker-mcp",
    "crucible-plugin-service-oubliette",
    "crucible-plugin-console-rich",
    "crucible-plugin-flow-page",
    "crucible-plugin-service-transports",
    "crucible-plugin-publish-github",
    "crucible-plugin-workflow-starlark",
    "crucible-plugin-lane-playbook",
    "crucible-plugin-search-wide",
    "crucible-plugin-results-md",
    "crucible-plugin-telemetry-otlp",
    "crucible-plugin-run-records",
    "crucible-plugin-task-agent",
    "crucible-plugin-packs",
    "crucible-plugin-distress",
    "crucible-plugin-lane-plan",
    "crucible-plugin-world-composite",
    "crucible-plugin-scope",
}


def _link_distribution(name: str, into: Path, done: set[str]) -> None:
    """Symlink an installed distribution (its top-level files and dist-info) and its runtime
    requirements into `into`, so a subprocess sees exactly these and nothing else."""
    dist = distribution(name)
    key = dist.metadata["Name"].lower().replace("_", "-")
    if key in done:
        return
    done.add(key)
    for file in dist.files or ():
        top = file.parts[0]
        source = Path(str(dist.locate_file(top)))
        target = into / top
        if top != ".." and source.exists() and not target.exists():
            target.symlink_to(source)
    for requirement in dist.requires or ():
        if ";" in requirement:  # extras and old-Python backports
            continue
        match = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert match
        _link_distribution(match.group(0), into, done)


@pytest.fixture(scope="module")
def core_alone(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`python -S` with crucible-core pip-installed (non-editable) plus its dependencies only."""
    site = tmp_path_factory.mktemp("core-site")
    subprocess.run(
        [*PIP_INSTALL, "--no-deps", "--target", str(site), str(ROOT / "crucible_core")],
        check=True,
        capture_output=True,
    )
    deps = tmp_path_factory.mktemp("core-deps")
    done = {"crucible-core"}
    for requirement in distribution("crucible-core").requires or ():
        _link_distribution(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0), deps, done)  # type: ignore[union-attr]
    return [str(site), str(deps)]


def _crucible(path: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    env = crucible_env(PYTHONPATH=":".join(path))
    code = "import sys; from crucible_core.cli.main import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-S", "-c", code, *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_core_alone_imports_and_lists_only_itself(core_alone: list[str]) -> None:
    where = subprocess.run(
        [sys.executable, "-S", "-c", "import crucible_core; print(crucible_core.__file__)"],
        env=crucible_env(PYTHONPATH=":".join(core_alone)),
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(core_alone[0]), where.stderr  # the installed copy, not the clone
    listing = _crucible(core_alone, "plugins", "--json")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    report = json.loads(listing.stdout)
    assert [p["distribution"] for p in report["plugins"]] == ["crucible-core"]
    registered = report["plugins"][0]["registered"]
    assert registered["reporter"] == ["console", "headless", "jsonl"]
    assert registered["task kind"] == [
        "command",  # agent, evaluate and top_k are crucible-plugin-task-agent's
        "engine_propose",
        "engine_apply",
        "engine_measure",
        "engine_grade",
        "engine_decide",
    ]
    # the broker's tools and the output kinds come with the broker, distress and forge plugins
    assert "broker tool" not in registered and "output kind" not in registered
    # every rendering, and `crucible flow`, is the flow page plugin's
    assert "flow renderer" not in registered
    # no init template: claude's come with the Claude harness plugin, playbook's workflow.star with
    # the Starlark one, the agentless command template with crucible-plugin-packs
    assert set(registered) == {
        "reporter",
        "task kind",
    }
    assert report["failures"] == [] and report["conflicts"] == []


def test_an_installed_core_ships_no_test_kit(core_alone: list[str]) -> None:
    # the kit is crucible-testkit's (plugins/testkit): core alone has neither it nor its fixtures
    site = Path(core_alone[0])
    assert (site / "crucible_core" / "api.py").is_file()
    assert not (site / "crucible_core" / "testing").exists()
    (entry_points,) = site.glob("crucible_core-*.dist-info/entry_points.txt")
    assert "pytest11" not in entry_points.read_text()


def test_an_installed_core_carries_the_guides(core_alone: list[str]) -> None:
    listing = _crucible(core_alone, "help")
    assert listing.returncode == 0, listing.stderr
    guides = {line.split()[0] for line in listing.stdout.splitlines() if line.startswith("  ")}
    assert guides == {p.stem for p in (ROOT / "docs").glob("*.md")}
    manifest = _crucible(core_alone, "help", "manifest")
    assert manifest.stdout == (ROOT / "docs" / "manifest.md").read_text() + "\n"
    unknown = _crucible(core_alone, "help", "manifst")
    assert unknown.returncode == 64 and "did you mean 'manifest'" in unknown.stderr


def test_a_bad_manifest_points_at_crucible_help(tmp_path: Path) -> None:
    manifest = tmp_path / "crucible.toml"
    manifest.write_text(
        '[repo]\npath = "."\n[agent]\nbackend = "command"\nagent_cmd = "true"\ngoal = "x"\nmodle = 1\n'
    )
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 10
    assert "see `crucible help manifest`" in done.stderr and "docs/manifest.md" not in done.stderr


def test_the_meta_distribution_resolves_to_the_standard_set_offline(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    members = ["crucible_core", "plugins/world_git", "plugins/judge_command", "plugins/backend_local"]
    members += [
        "plugins/backend_openshell",
        "plugins/harness_claude",
        "plugins/harness_codex",
        "plugins/harness_acp",
        "plugins/harness_endpoint",
        "plugins/harness_opencode",
        "plugins/harness_pi",
        "plugins/deploy_kubernetes",
        "plugins/broker_mcp",
    ]
    members += [
        "plugins/service_oubliette",
        "plugins/console_rich",
        "plugins/flow_page",
        "plugins/service_transports",
        "plugins/publish_github",
        "plugins/workflow_starlark",
        "plugins/lane_playbook",
        "plugins/search_wide",
        "plugins/results_md",
        "plugins/telemetry_otlp",
        "plugins/run_records",
        "plugins/task_agent",
        "plugins/packs",
        "plugins/distress",
        "plugins/lane_plan",
        "plugins/world_composite",
        "plugins/scope",
    ]
    done = subprocess.run(
        [
            *PIP_INSTALL,
            "--dry-run",
            "--no-index",
            "--report",
            str(report),
            str(ROOT),
            *(str(ROOT / m) for m in members),
        ],
        capture_output=True,
        text=True,
        env=crucible_env(),
    )
    assert done.returncode == 0, done.stderr
    installed = {item["metadata"]["name"] for item in json.loads(report.read_text())["install"]}
    assert installed == {"crucible"} | STANDARD_SET
    meta = next(i for i in json.loads(report.read_text())["install"] if i["metadata"]["name"] == "crucible")
    assert {re.match(r"[a-z-]+", r).group(0) for r in meta["metadata"]["requires_dist"]} == STANDARD_SET  # type: ignore[union-attr]


def test_every_distribution_names_its_docs_and_source() -> None:
    pyprojects = [ROOT / "pyproject.toml", ROOT / "crucible_core" / "pyproject.toml"]
    pyprojects += sorted(ROOT.glob("plugins/*/pyproject.toml")) + sorted(
        ROOT.glob("examples/*/pyproject.toml")
    )
    assert len(pyprojects) >= 8
    for path in pyprojects:
        urls = tomllib.loads(path.read_text())["project"].get("urls", {})
        assert {"Documentation", "Source"} <= set(urls), path


def test_core_depends_on_the_five_small_libraries_only() -> None:
    # The minimal-core promise: everything heavier (rich, mcp, starlark-pyo3, dulwich, kubernetes,
    # the agent SDKs) belongs to the plugin that needs it, so `pip install crucible-core` pulls
    # exactly these.
    project = tomllib.loads((ROOT / "crucible_core" / "pyproject.toml").read_text())["project"]
    names = {
        re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()
        for requirement in project["dependencies"]
    }
    assert names == {"attrs", "cattrs", "pluggy", "stevedore", "click"}
