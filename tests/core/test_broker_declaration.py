"""Output bounds, the mediation point and disclosure: the pure parts, and what check/exposure/run make of them."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crucible_core.broker.declaration import resolve
from crucible_core.broker.outputs import (
    FixedTarget,
    OpenScope,
    OpenTarget,
    OutputKindSpec,
    ResolvedOutput,
    scope_admits,
    scope_is_unbounded,
)
from crucible_core.errors import ManifestError, PluginError
from crucible_core.hookspecs import hookimpl
from crucible_core.manifest.loader import load_manifest
from crucible_core.plugins import load_plugins
from crucible_core.run.prompt import DEFAULT_METHOD, render
from tests.cli_support import run_crucible

VOCABULARY = [
    "draft-pr",
    "tracker-comment",
    "chat-message",
    "image-push",
    "deploy",
    "workflow-dispatch",
    "gpu-capture",
    "run-record",
]


def bound(kind: str, target: Any, count: int = 2) -> ResolvedOutput:
    return ResolvedOutput(kind, count, target, "manifest", kind != "gpu-capture")


def test_the_vocabulary_and_its_defaults_are_conservative() -> None:
    assert list(kinds()) == VOCABULARY
    for spec in kinds().values():
        assert spec.default_count > 0
        assert spec.addresses_target == (spec.name != "gpu-capture")
    with pytest.raises(ValueError):
        OutputKindSpec("Bad Kind", "x", 1)


@pytest.mark.parametrize(
    ("scope", "value", "admitted"),
    [
        ("PROJ-12", "PROJ-12", True),
        ("PROJ-12", "PROJ-123", False),
        ("quay.io/team", "quay.io/team/app:1", True),
        ("quay.io/team", "quay.io/team-evil/app", False),
        ("quay.io/team/app", "quay.io/team/app@sha256:ab", True),
        ("PROJ-*", "PROJ-99", True),
        ("PROJ-*", "OTHER-1", False),
        ("*.example.com", "api.example.com", True),
        ("*.example.com", "example.org", False),
        ("a*b*c", "axxbyyc", True),
        ("", "anything", False),
    ],
)
def test_scope_admits(scope: str, value: str, admitted: bool) -> None:
    assert scope_admits(scope, value) is admitted


def test_unbounded_scopes() -> None:
    assert all(scope_is_unbounded(s) for s in ["", "  ", "*", "**", "*/*", "*:*"])
    assert not any(scope_is_unbounded(s) for s in ["PROJ-*", "org/repo", "*.example.com"])


# -- manifests ---------------------------------------------------------------------------------
BASE = """
[repo]
path = "."

[agent]
backend = "command"
agent_cmd = "true"
goal = "g"
env = { API_TOKEN = "tok-abcdef-123456", MODE = "fast" }

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Callable[[str], Path]:
    def write(extra: str) -> Path:
        path = tmp_path / "crucible.toml"
        path.write_text(BASE + extra)
        return path

    return write


def kinds() -> dict[str, OutputKindSpec]:
    """The standard vocabulary as the installed plugins register it (broker and forge plugins), in
    the contract's order."""
    from crucible_core.broker.service import installed_kinds

    installed = installed_kinds(load_plugins())
    assert sorted(installed) == sorted(VOCABULARY)
    return {name: installed[name] for name in VOCABULARY}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[outputs.tracker-comment]\ncount = 1\ntarget = { open = { scope = "*" } }\n', "admits any target"),
        ('[outputs.tracker-comment]\ncount = -1\ntarget = { fixed = "PROJ-1" }\n', "count must be 0 or more"),
        ('[outputs.tracker-comment]\ncount = 1\ntarget = { anywhere = "x" }\n', "a target is"),
        (
            "[outputs.tracker-comment]\ntarget = { fixed = 'PROJ-1' }\n",
            "[outputs.tracker-comment].count is required",
        ),
        (
            '[[capabilities.secret]]\nname = "T"\ncontext = "sandbox"\nsystem = "jira"\nscope = "read"\n',
            "context must be one of broker, agent",
        ),
    ],
)
def test_shape_errors_are_manifest_errors_naming_the_key(
    manifest: Callable[[str], Path], extra: str, message: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(manifest(extra))
    assert message in caught.value.render()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[outputs.trackr-comment]\ncount = 1\n", "did you mean 'tracker-comment'?"),
        (
            '[outputs.gpu-capture]\ncount = 1\ntarget = { fixed = "x" }\n',
            "addresses nothing, so it takes no target",
        ),
        ("[outputs.draft-pr]\ncount = 1\n", "[outputs.draft-pr] needs a target"),
        ('[agent.broker]\ntools = ["distres"]\n', "did you mean 'distress'?"),
    ],
)
def test_vocabulary_errors_name_the_key(manifest: Callable[[str], Path], extra: str, message: str) -> None:
    loaded = load_manifest(manifest(extra))
    with pytest.raises(ManifestError) as caught:
        resolve(loaded, kinds(), ["distress", "escalate"], environ={})
    assert message in caught.value.render()


def test_undeclared_kinds_take_the_default_table(manifest: Callable[[str], Path]) -> None:
    loaded = load_manifest(manifest('[outputs.image-push]\ncount = 3\ntarget = { fixed = "quay.io/team" }\n'))
    declaration = resolve(loaded, kinds(), [], environ={"CRUCIBLE_PR_REPO": "org/repo"})
    by_kind = {o.kind: o for o in declaration.outputs}
    assert [o.kind for o in declaration.outputs] == sorted(VOCABULARY)
    assert (by_kind["image-push"].count, by_kind["image-push"].source) == (3, "manifest")
    assert by_kind["draft-pr"].target == FixedTarget("org/repo") and by_kind["draft-pr"].count == 2
    assert by_kind["chat-message"].target == FixedTarget("operator-channel")
    assert by_kind["deploy"].target is None  # unresolved: every deploy is refused
    defaults = [o for o in declaration.outputs if o.source == "engine-default"]
    assert all(o.count > 0 and not isinstance(o.target, OpenTarget) for o in defaults)


def test_the_disclosure_names_every_agent_env_grant_and_refuses_an_uncovered_one(
    manifest: Callable[[str], Path],
) -> None:
    extra = (
        '[[capabilities.secret]]\nname = "API_TOKEN"\ncontext = "broker"\nsystem = "jira"\nscope = "read"\n'
    )
    loaded = load_manifest(manifest(extra))
    declaration = resolve(loaded, kinds(), ["distress"], environ={})
    wire = declaration.to_wire()["capabilities"]
    assert [g["name"] for g in wire["agent_env"]] == ["API_TOKEN", "MODE"]
    assert wire["commands_outside_sandbox"] is True and "[judge].measure_cmd" in wire["host_commands"]
    (problem,) = declaration.capabilities.uncovered_grants()
    assert "[agent].env grants API_TOKEN" in problem and "[[capabilities.secret]] API_TOKEN" in problem
    covered = load_manifest(manifest(extra.replace('"broker"', '"agent"')))
    assert resolve(covered, kinds(), [], environ={}).capabilities.uncovered_grants() == []


def test_the_prompt_states_the_declaration(manifest: Callable[[str], Path]) -> None:
    loaded = load_manifest(manifest(""))
    statement = "\n".join(resolve(loaded, kinds(), ["distress"], environ={}).describe())
    text = render(DEFAULT_METHOD, goal="g", status="s", steer="", capabilities=statement)
    assert "mcp__crucible__distress" in text and "gpu-capture: at most 100" in text
    assert "{{CAPABILITIES}}" not in text
    custom = render("Do {{GOAL}}.", goal="it", status="", steer="", capabilities=statement)
    assert custom.startswith("Do it.") and "draft-pr: at most 2" in custom  # appended when absent


def test_plugin_kinds_are_typed_and_join_the_vocabulary(manifest: Callable[[str], Path]) -> None:
    from crucible_core.broker.service import declaration_for

    module = types.ModuleType("kinds_plugin")

    def crucible_register_output_kinds(register: Any) -> None:
        register("slack-post", OutputKindSpec("slack-post", "a Slack post", 3, default_target="#ops"))

    module.crucible_register_output_kinds = hookimpl(crucible_register_output_kinds)  # type: ignore[attr-defined]
    plugins = load_plugins(names=["core"])
    plugins.register_module(module, name="kinds", distribution="crucible-plugin-kinds", version="0")
    declaration = declaration_for(plugins, load_manifest(manifest("")), environ={})
    assert declaration.output("slack-post") == ResolvedOutput(
        "slack-post", 3, FixedTarget("#ops"), "engine-default", True, "a Slack post"
    )

    broken = types.ModuleType("broken_plugin")
    broken.crucible_register_output_kinds = hookimpl(lambda register: register("x-kind", {"count": 1}))  # type: ignore[attr-defined]
    plugins = load_plugins(names=["core"])
    plugins.register_module(broken, name="broken", distribution="crucible-plugin-broken", version="0")
    with pytest.raises(PluginError):
        declaration_for(plugins, load_manifest(manifest("")), environ={})


# -- the CLI: check and plan exposure print the same resolution; run refuses an uncovered grant ---
def test_check_and_exposure_print_the_same_bounds(example) -> None:
    path = example("counter")
    with path.open("a") as handle:
        handle.write('\n[outputs.tracker-comment]\ncount = 1\ntarget = { open = { scope = "PROJ-*" } }\n')
        # a command agent has the broker (and so bounds that apply to it) only when asked
        handle.write("\n[agent.broker]\nenabled = true\n")
    exposure = run_crucible("plan", "exposure", "--manifest", path)
    assert exposure.returncode == 0, exposure.stderr
    document = json.loads(exposure.stdout)
    assert set(document) == {"version", "outputs", "capabilities"}
    outputs = document["outputs"]["outputs"]
    assert [o["kind"] for o in outputs] == sorted(VOCABULARY)
    declared = next(o for o in outputs if o["kind"] == "tracker-comment")
    assert declared == {
        "kind": "tracker-comment",
        "count": 1,
        "target": {"open": {"scope": "PROJ-*", "param": None}},
        "source": "manifest",
    }
    check = run_crucible("check", "--manifest", path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "tracker-comment: at most 1, open within PROJ-* (declared)" in check.stdout
    for o in outputs:
        assert f"{o['kind']}: at most {o['count']}," in check.stdout
    # The command backend confines nothing, and both say so: the agent has the host's network.
    egress = document["capabilities"]["egress"]
    assert egress == {"restricted": False, "endpoints": [], "binaries": [], "by": "command"}
    # the command backend's agent_cmd (a plugin-owned key) is a pack command on the host too
    assert "[agent].agent_cmd" in document["capabilities"]["host_commands"]
    assert (
        "egress: unrestricted" in check.stdout and "backend command runs no egress allowlist" in check.stdout
    )
    assert not (path.parent / "state").exists()  # neither created run state


def test_exposure_refuses_an_unknown_kind(example) -> None:
    path = example("counter")
    with path.open("a") as handle:
        handle.write("\n[outputs.image-pusj]\ncount = 1\n")
    done = run_crucible("plan", "exposure", "--manifest", path)
    assert done.returncode == 10 and "did you mean 'image-push'?" in done.stderr


def test_a_run_refuses_an_uncovered_grant_before_anything_starts(example) -> None:
    path = example("counter")
    text = path.read_text().replace('goal = "', 'env = { API_TOKEN = "tok-0123456789" }\ngoal = "', 1)
    text += (
        '\n[[capabilities.secret]]\nname = "API_TOKEN"\ncontext = "broker"\nsystem = "jira"\nscope = "read"\n'
    )
    path.write_text(text)
    done = run_crucible("--manifest", path, "--iterations", "1", "--ui", "headless")
    assert done.returncode == 4, done.stderr
    assert "[agent].env grants API_TOKEN" in done.stderr and "broker-held" in done.stderr
    assert not (path.parent / "workspace").exists()


def test_a_run_parameter_outside_its_scope_is_refused_at_run_start(example) -> None:
    path = example("counter")
    with path.open("a") as handle:
        handle.write(
            '\n[outputs.tracker-comment]\ncount = 1\ntarget = { open = { scope = "PROJ-*", param = "issue_key" } }\n'
        )
    done = run_crucible(
        "--manifest", path, "--iterations", "1", "--ui", "headless", "--param", "issue_key=OTHER-1"
    )
    assert done.returncode == 4, done.stderr
    assert "run parameter issue_key = 'OTHER-1' is outside" in done.stderr
    assert not (path.parent / "workspace").exists()
    bad = run_crucible("--manifest", path, "--param", "no-equals-sign")
    assert bad.returncode == 64 and "is not NAME=VALUE" in bad.stderr
    ok = run_crucible(
        "--manifest", path, "--iterations", "1", "--ui", "headless", "--param", "issue_key=PROJ-4"
    )
    assert ok.returncode == 0, ok.stderr
    from crucible_core.broker.service import recorded_params
    from crucible_core.session_log import read_events

    assert recorded_params(read_events(path.parent / "state" / "session.jsonl")) == {"issue_key": "PROJ-4"}


def test_param_problems() -> None:
    from crucible_core.broker.outputs import param_problems

    pinned = (bound("tracker-comment", OpenTarget(OpenScope("PROJ-*", "issue"))),)
    assert param_problems(pinned, {"issue": "PROJ-1"}) == []
    assert param_problems(pinned, {}) == []  # a missing parameter refuses each write instead
    (problem,) = param_problems(pinned, {"issue": "X-1"})
    assert "[outputs.tracker-comment].target.open.scope = 'PROJ-*'" in problem
