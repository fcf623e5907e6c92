"""The shared endpoint library on its own: the seed step under a real sh, pricing, the host turn's
directory, the CLI lookup, the toolbox; and that `crucible --help` loads none of these harnesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crucible_core import process
from crucible_core.errors import ManifestError
from crucible_core.protocols import FailureClass, SandboxCommand, SandboxLayout, Turn, TurnResult
from crucible_harness_endpoint import endpoint
from crucible_harness_endpoint.cli_lookup import AgentCli
from crucible_harness_endpoint.endpoint import credential_problem, endpoint_hosts, refusal, seed_step
from crucible_harness_endpoint.host_turn import run_on_host
from crucible_harness_endpoint.pricing import FALLBACK, PRICES, Usage, cost_usd, price_of
from crucible_harness_endpoint.toolbox import install_toolbox, resolve_toolbox
from tests.cli_support import crucible_env
from tests.harness_claude.support import Recorder, make_turn

# -- the seed step: the API chosen from the turn's environment, in the turn itself ----------------


def seed(tmp_path: Path, env: dict[str, str], model: str = "gpt-4.1") -> tuple[process.Completed, str]:
    files = endpoint.template_files(
        str(tmp_path), lambda wire: f'{{"wire": "{wire}", "url": "{endpoint.BASE_URL_SLOT}"}}'
    )
    for path, data in files.items():
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).write_bytes(data)
    config = tmp_path / "out.json"
    config.unlink(missing_ok=True)
    script = seed_step(str(config), str(tmp_path), model) + 'stat -c %a "$crucible_config"\n'
    done = process.run(["sh", "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env}, timeout=30)
    return done, config.read_text() if config.exists() else ""


@pytest.mark.parametrize(
    ("env", "model", "wire", "url"),
    [
        (
            {"OPENAI_BASE_URL": "http://gw:8000/v1", "OPENAI_API_KEY": "k"},
            "qwen",
            "chat",
            "http://gw:8000/v1",
        ),
        ({"OPENAI_API_KEY": "k"}, "gpt-4.1", "responses", "https://api.openai.com/v1"),
        (
            {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "a"},
            "gpt-4.1",
            "responses",
            "https://api.openai.com/v1",
        ),
        (
            {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "a"},
            "claude-sonnet-4-6",
            "anthropic",
            "https://api.anthropic.com",
        ),
        (
            {"ANTHROPIC_API_KEY": "a", "ANTHROPIC_BASE_URL": "http://gw:9"},
            "claude-x",
            "anthropic",
            "http://gw:9",
        ),
    ],
)
def test_the_seed_step_picks_the_api_the_environment_names(
    tmp_path: Path, env: dict[str, str], model: str, wire: str, url: str
) -> None:
    done, written = seed(tmp_path, env, model)
    assert done.exit_code == 0, done.stderr
    assert written == f'{{"wire": "{wire}", "url": "{url}"}}\n'
    assert done.stdout.strip() == "600"  # the config may carry an MCP bearer
    assert credential_problem(env) is None  # the host's own check agrees


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({}, endpoint.CREDENTIAL_HINT),
        ({"ANTHROPIC_BASE_URL": "http://gw:9"}, endpoint.CREDENTIAL_HINT),
        ({"OPENAI_BASE_URL": "http://gw:8000/v1", "ANTHROPIC_API_KEY": "a"}, endpoint.OPENAI_KEY_HINT),
    ],
)
def test_a_turn_without_the_key_its_api_needs_is_refused_before_the_cli_starts(
    tmp_path: Path, env: dict[str, str], why: str
) -> None:
    done, written = seed(tmp_path, env)
    assert done.exit_code == endpoint.REFUSED_EXIT and written == ""
    assert refusal(done) == why == credential_problem(env)


@pytest.mark.parametrize("url", ['http://gw"/v1', "http://gw\\x", "http://gw /v1", "http://gw\t/v1"])
def test_a_base_url_no_json_string_may_hold_is_refused(tmp_path: Path, url: str) -> None:
    done, written = seed(tmp_path, {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"})
    assert done.exit_code == endpoint.REFUSED_EXIT and written == ""
    assert "base URL has a quote, a backslash, a space or a control character" in (refusal(done) or "")


def test_a_cli_exiting_78_on_its_own_is_not_a_refusal() -> None:
    assert refusal(process.Completed(78, "", "some error of the CLI", False, 0.1)) is None


def test_the_endpoint_hosts_a_sandbox_must_reach() -> None:
    assert endpoint_hosts({}) == [("api.openai.com", 443)]
    env = {"OPENAI_BASE_URL": "http://vllm.internal:8000/v1", "ANTHROPIC_BASE_URL": "https://gw.example"}
    assert endpoint_hosts(env) == [("api.openai.com", 443), ("vllm.internal", 8000), ("gw.example", 443)]
    for odd in (
        "http://[::1:bad",
        "http://[::1]:8000/v1",
        "http://my_host:80/v1",
        "file:///tmp/x",
        "gw:8000",
    ):
        assert endpoint_hosts({"OPENAI_BASE_URL": odd}) == [("api.openai.com", 443)], odd


def test_a_harness_states_the_reach_its_sandboxed_turns_need() -> None:
    from crucible_harness_endpoint.endpoint import sandbox_reach

    reach = sandbox_reach({"OPENAI_BASE_URL": "http://vllm.internal:8000/v1"}, ["/usr/local/bin/agent"])
    assert reach.restricted and reach.binaries == ("/usr/local/bin/agent",)
    assert [(e.host, e.port, e.access) for e in reach.endpoints] == [
        ("api.openai.com", 443, "full"),
        ("vllm.internal", 8000, "full"),
    ]


def test_no_model_named_anywhere_is_refused_with_where_to_name_one() -> None:
    assert endpoint.resolve_model("own", "shared", "pi") == "own"
    assert endpoint.resolve_model(None, "shared", "pi") == "shared"
    with pytest.raises(ManifestError) as refused:
        endpoint.resolve_model(None, None, "pi")
    assert "[agent.pi].model" in (refused.value.hint or "")


# -- pricing ---------------------------------------------------------------------------------------


def test_the_longest_model_prefix_sets_the_price_and_an_unknown_model_pays_the_dearest() -> None:
    assert price_of("gpt-4.1-mini-2025-04-14") == (PRICES["gpt-4.1-mini"], True)
    assert price_of("openai/gpt-4.1") == (PRICES["gpt-4.1"], True)  # a gateway's org prefix
    assert price_of("Qwen/Qwen3-32B") == (PRICES["qwen"], True)
    assert price_of("my-private-model") == (FALLBACK, False)
    assert FALLBACK.output == max(p.output for p in PRICES.values())
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert cost_usd("gpt-4.1", usage) == pytest.approx(2.0 + 8.0 + 0.5)


# -- a turn run on the host ------------------------------------------------------------------------


@pytest.fixture
def fake_cli(tmp_path: Path) -> AgentCli:
    program = tmp_path / "bin" / "agent"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\ncat\n")
    program.chmod(0o755)
    return AgentCli("agent", "CRUCIBLE_TEST_AGENT_BIN", "npm install -g agent")


def test_the_host_turn_runs_in_a_private_directory_it_removes(tmp_path: Path, fake_cli: AgentCli) -> None:
    seen: dict[str, Any] = {}
    lines: list[str] = []

    def describe(turn: Turn, layout: SandboxLayout, program: str) -> SandboxCommand:
        seen.update(layout=layout, program=program)
        script = f"cat {layout.private}/config.json; echo; stat -c %a {layout.private}/config.json {layout.private}; cat"
        return SandboxCommand(
            argv=("sh", "-c", script),
            env={"PATH": "/usr/bin:/bin"},
            stdin=b"the prompt",
            on_stdout_line=lines.append,
            finish=lambda done: TurnResult(done.exit_code == 0, note=" | ".join(lines)),
            files={f"{layout.private}/config.json": b'{"bearer": "b-1"}'},
        )

    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "OPENAI_API_KEY": "k"}
    result = run_on_host(fake_cli, describe, make_turn(tmp_path, env, Recorder()), prefix="crucible-test-")
    assert result.ok and result.note == '{"bearer": "b-1"} | 600 | 700 | the prompt'
    layout = seen["layout"]
    assert layout.workdir == str(tmp_path) and Path(layout.home).parent.name.startswith("crucible-test-")
    assert seen["program"] == str(tmp_path / "bin" / "agent")
    assert not Path(layout.home).parent.exists()


def test_the_host_turn_refuses_a_file_outside_its_directory(tmp_path: Path, fake_cli: AgentCli) -> None:
    def describe(turn: Turn, layout: SandboxLayout, program: str) -> SandboxCommand:
        return SandboxCommand(
            ("true",), {}, b"", print, lambda done: TurnResult(True), {f"{layout.home}/../../x": b""}
        )

    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "OPENAI_API_KEY": "k"}
    result = run_on_host(fake_cli, describe, make_turn(tmp_path, env, Recorder()), prefix="crucible-test-")
    assert (
        not result.ok
        and result.failure is FailureClass.SPAWN
        and "not under the turn's directory" in result.note
    )


def test_the_host_turn_refuses_a_missing_cli_or_key_before_describing_anything(
    tmp_path: Path, fake_cli: AgentCli
) -> None:
    def describe(turn: Turn, layout: SandboxLayout, program: str) -> SandboxCommand:
        raise AssertionError("nothing may be laid out for a turn that cannot start")

    no_cli = run_on_host(
        fake_cli, describe, make_turn(tmp_path, {"PATH": "/usr/bin:/bin"}, Recorder()), prefix="x"
    )
    assert no_cli.failure is FailureClass.SPAWN
    assert no_cli.note.startswith(
        "the agent CLI was not found (`agent` on PATH): install it with `npm install"
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    no_key = run_on_host(fake_cli, describe, make_turn(tmp_path, env, Recorder()), prefix="x")
    assert no_key.failure is FailureClass.SPAWN and no_key.note == endpoint.CREDENTIAL_HINT


def test_the_cli_is_found_by_its_variable_or_on_the_turns_path(tmp_path: Path, fake_cli: AgentCli) -> None:
    program = tmp_path / "bin" / "agent"
    assert fake_cli.find({"PATH": str(program.parent)}) == program
    assert fake_cli.find({"PATH": "/usr/bin", "CRUCIBLE_TEST_AGENT_BIN": str(program)}) == program
    assert fake_cli.find({"PATH": "/usr/bin", "CRUCIBLE_TEST_AGENT_BIN": str(tmp_path / "nope")}) is None
    assert (
        fake_cli.in_sandbox({}) == "agent"
        and fake_cli.in_sandbox({"CRUCIBLE_TEST_AGENT_BIN": "/opt/a"}) == "/opt/a"
    )


def test_the_toolbox_is_copied_over_the_skills_dir_every_turn(tmp_path: Path) -> None:
    (tmp_path / "box" / "s").mkdir(parents=True)
    (tmp_path / "box" / "s" / "SKILL.md").write_text("mine")
    toolbox = resolve_toolbox("box", tmp_path)
    assert toolbox is not None
    ws = tmp_path / "ws"
    (ws / ".agents" / "skills" / "s").mkdir(parents=True)
    (ws / ".agents" / "skills" / "s" / "SKILL.md").write_text("edited by the agent")
    (ws / ".agents" / "skills" / "own").mkdir()
    install_toolbox(toolbox, ws, ".agents/skills")
    assert (ws / ".agents" / "skills" / "s" / "SKILL.md").read_text() == "mine"
    assert (ws / ".agents" / "skills" / "own").is_dir()
    with pytest.raises(ManifestError, match="toolbox_dir"):
        resolve_toolbox("../elsewhere", tmp_path)


# -- loading ---------------------------------------------------------------------------------------


def test_crucible_help_imports_none_of_the_harnesses_and_loading_plugins_only_their_hooks(
    tmp_path: Path,
) -> None:
    probe = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "ours = ('crucible_harness_opencode', 'crucible_harness_pi', 'crucible_harness_endpoint')\n"
        "print(sorted(m for m in sys.modules if m.startswith(ours)), file=sys.stderr)\n"
        "from crucible_core.plugins import load_plugins\n"
        "print(load_plugins().registry('harness').names(), file=sys.stderr)\n"
        "print(sorted(m for m in sys.modules if m.startswith(ours)), file=sys.stderr)\n"
    )
    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env
    )  # fills the command cache
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    help_modules, names, loaded = done.stderr.strip().splitlines()[-3:]
    assert help_modules == "[]", done.stderr
    assert "'opencode'" in names and "'pi'" in names
    # settings are named by import path: listing the harnesses builds none of their settings classes
    assert loaded == str(sorted(["crucible_harness_opencode", "crucible_harness_pi"]))


@pytest.mark.parametrize("plant", ["skills dir", "skill dir", "skill file", "hard link"])
def test_the_toolbox_never_writes_through_what_the_agent_planted(tmp_path: Path, plant: str) -> None:
    """The skills directory outlives restores (it is spared), so an earlier turn may have left links
    in it: the next turn's copy must not write outside the workspace through them."""
    (tmp_path / "box" / "s").mkdir(parents=True)
    (tmp_path / "box" / "s" / "SKILL.md").write_text("mine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("precious")
    ws = tmp_path / "ws"
    skills = ws / ".agents" / "skills"
    skills.mkdir(parents=True)
    if plant == "skills dir":
        skills.rmdir()
        skills.symlink_to(outside)
    elif plant == "skill dir":
        (skills / "s").symlink_to(outside)
    else:
        (skills / "s").mkdir()
        if plant == "skill file":
            (skills / "s" / "SKILL.md").symlink_to(outside / "SKILL.md")
        else:
            os.link(outside / "SKILL.md", skills / "s" / "SKILL.md")
    # A link on the way is replaced by a real directory, a planted file is replaced: never written through.
    install_toolbox(tmp_path / "box", ws, ".agents/skills")
    copied = skills / "s" / "SKILL.md"
    assert copied.read_text() == "mine" and not copied.is_symlink() and os.lstat(copied).st_nlink == 1
    assert not skills.is_symlink() and not (skills / "s").is_symlink()
    assert (outside / "SKILL.md").read_text() == "precious" and sorted(os.listdir(outside)) == ["SKILL.md"]


def test_a_killed_engines_turn_directory_is_swept_and_nothing_else(tmp_path: Path) -> None:
    from crucible_harness_endpoint.host_turn import sweep_orphans

    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    orphan = tmp_path / f"crucible-x-{gone.pid}-abc"
    live = tmp_path / f"crucible-x-{os.getpid()}-def"
    other = tmp_path / "crucible-x-notapid"
    planted = tmp_path / f"crucible-x-{gone.pid}-link"
    for folder in (orphan, live, other):
        folder.mkdir()
        (folder / "opencode.db").write_text("a conversation")
    planted.symlink_to(live)
    assert sweep_orphans("crucible-x-", tmp_path) == [orphan]
    assert not orphan.exists() and live.exists() and other.exists() and planted.is_symlink()
