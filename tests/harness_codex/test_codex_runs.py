"""Whole `crucible run`s with harness = "codex": the real Codex CLI against the scripted Responses API.

The domain is the Claude harness tests' counter (value.txt is the score): only `harness` and the
[agent.codex] table differ, which is the point: choosing the agent is configuration.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.openai_responses import FakeResponses, Reasoning, Reply, Script, Text, shell
from tests.harness_claude.support import write_domain
from tests.harness_codex.support import TEST_MODEL, ReachRecorder, fallback_cost
from tests.hostile.test_canary import forms, git_objects

pytestmark = pytest.mark.codex_cli

KEY = "sk-proj-CanaryCodexKey-7f3a9c1e5b2d4a6f8e0c"  # the engine's OPENAI_API_KEY_WORK
PER_TURN = fallback_cost((2000, 500, 100), (2000, 500, 100))


def codex_domain(root: Path, fake: FakeResponses, reach: ReachRecorder, **table: str) -> Path:
    """The counter domain on the codex harness, signing in with the deployment's WORK key."""
    manifest = write_domain(root, {"OPENAI_BASE_URL": fake.base_url, **reach.env()}, harness="codex")
    settings = {"model": TEST_MODEL, "auth": "api", "api_key": "WORK", **table}
    with manifest.open("a") as handle:
        handle.write("\n[agent.codex]\n" + "".join(f'{k} = "{v}"\n' for k, v in settings.items()))
    return manifest


def engine_env(codex_cli: Path, **extra: str) -> dict[str, str]:
    return crucible_env(CRUCIBLE_CODEX_BIN=str(codex_cli), OPENAI_API_KEY_WORK=KEY, **extra)


def agent_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["event"] for e in events if e["kind"] == "agent"]


def test_the_counter_keeps_a_codex_turns_edit_with_its_events_and_cost_in_the_log(
    fake: FakeResponses, codex_cli: Path, reach: ReachRecorder, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = codex_domain(domain, fake, reach)
    # Each turn writes 2: the first raises the score, the second changes nothing (discarded unmeasured).
    fake.script = Script(
        [shell("echo 2 > value.txt"), Reply([Reasoning("Done."), Text("Raised the value.")])]
    )

    check = run_crucible("check", "--manifest", manifest, env=engine_env(codex_cli))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "harness=codex" in check.stdout and f"model={TEST_MODEL}" in check.stdout

    done = run_crucible(
        "--manifest", manifest, "--iterations", "2", "--ui", "headless", env=engine_env(codex_cli)
    )
    assert done.returncode == 0, done.stderr
    events = list(read_events(domain / "state" / "session.jsonl"))
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == "codex"
    rows = [e["row"] for e in events if e["kind"] == "row"]
    assert [(r["decision"], r["score"]) for r in rows] == [("baseline", 1), ("keep", 2), ("discard", None)]
    assert (domain / "workspace" / "value.txt").read_text() == "2\n"

    agent = agent_events(events)
    inits = [e for e in agent if e["kind"] == "init"]
    assert [(e["harness"], e["model"]) for e in inits] == [("codex", TEST_MODEL)] * 2
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["shell", "shell"]
    tokens = [e for e in agent if e["kind"] == "tokens"]
    assert [t["cost_usd"] for t in tokens] == pytest.approx([PER_TURN, PER_TURN])
    assert [e["is_error"] for e in agent if e["kind"] == "result"] == [False, False]
    turns = [e for e in events if e["kind"] == "turn"]
    assert [(t["ok"], t["cost"]) for t in turns] == [(True, pytest.approx(PER_TURN))] * 2
    assert reach.targets == []  # the CLI reached nothing beyond the model

    # Flipping the harness back is configuration: the codex table is set aside, not refused.
    flipped = manifest.read_text().replace('harness = "codex"', 'harness = "claude"')
    manifest.write_text(flipped)
    check = run_crucible("check", "--manifest", manifest, env=engine_env(codex_cli))
    assert "harness=claude" in check.stdout, check.stdout + check.stderr
    assert "harness codex (crucible-plugin-harness-codex, not used by this run)" in check.stdout


def test_no_key_the_harness_handles_reaches_any_artifact(
    fake: FakeResponses, codex_cli: Path, reach: ReachRecorder, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = codex_domain(domain, fake, reach)
    fake.script = Script(
        [
            shell('echo "key=$OPENAI_API_KEY_WORK"; cat "$CODEX_HOME/auth.json"; echo 2 > value.txt'),
            Reply([Reasoning(f"The auth file said {KEY}."), Text(f"Done; the key was {KEY}.")]),
        ]
    )
    done = run_crucible(
        "--manifest", manifest, "--iterations", "1", "--ui", "headless", env=engine_env(codex_cli)
    )
    assert done.returncode == 0, done.stderr
    workspace = domain / "workspace"
    texts: dict[str, bytes] = {"stdout": done.stdout.encode(), "stderr": done.stderr.encode()}
    for path in [*(domain / "state").rglob("*"), workspace / "RESULTS.md", *(workspace / ".git").rglob("*")]:
        if path.is_file() and "objects" not in path.relative_to(domain).parts:
            texts[str(path)] = path.read_bytes()
    texts.update({f"{kind} object {n}": body for n, (kind, body) in enumerate(git_objects(workspace))})
    assert any(name.endswith("session.jsonl") for name in texts)
    for name, data in texts.items():
        text = data.decode("utf-8", "replace")
        for form in forms(KEY):
            assert form not in text, f"{form!r} (a form of the key) in {name}"
    # The evidence is there, masked: the command's output and the reply quoting the key.
    agent = agent_events(list(read_events(domain / "state" / "session.jsonl")))
    [output] = [e for e in agent if e["kind"] == "tool" and "result" in e]
    assert "key=\n" in output["result"] and '"OPENAI_API_KEY": "[REDACTED]"' in output["result"]
    assert [e["delta"] for e in agent if e["kind"] == "text"] == ["Done; the key was [REDACTED]."]
    # The model really was handed the key by the CLI (so the test is not vacuous).
    assert fake.model_requests()[0].headers["authorization"] == f"Bearer {KEY}"


def test_an_undeclared_or_missing_key_is_refused_before_anything_is_spent(
    fake: FakeResponses, codex_cli: Path, reach: ReachRecorder, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = codex_domain(domain, fake, reach)
    # The default key is there, but the manifest selects WORK, which is not: never a fallback.
    env = crucible_env(
        CRUCIBLE_CODEX_BIN=str(codex_cli), OPENAI_API_KEY="sk-proj-the-default-key-000000000000"
    )
    check = run_crucible("check", "--manifest", manifest, env=env)
    assert check.returncode != 0
    assert "needs an OpenAI key in OPENAI_API_KEY_WORK, which is not set" in check.stdout + check.stderr
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env)
    assert done.returncode != 0
    [line] = [line for line in done.stderr.splitlines() if "OPENAI_API_KEY_WORK" in line]
    assert "export OPENAI_API_KEY_WORK=<key>" in line
    assert "Traceback" not in done.stderr
    assert fake.requests == [] and not (domain / "state" / "session.jsonl").exists()

    # auto with no key and no ChatGPT sign-in material: refused the same way, with both fixes.
    manifest.write_text(manifest.read_text().replace('auth = "api"', 'auth = "auto"'))
    done = run_crucible("--manifest", manifest, "--iterations", "1", "--ui", "headless", env=env)
    assert (
        done.returncode != 0 and "CODEX_CREDENTIALS" in done.stderr and "OPENAI_API_KEY_WORK" in done.stderr
    )
    assert fake.requests == []


def test_the_plugin_registers_without_importing_the_harness(tmp_path: Path) -> None:
    """`crucible --help` loads no plugin; listing plugins imports only the registration module."""
    code = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('crucible_harness_codex')))\n"
        "from crucible_core.plugins import REGISTRATION_HOOKS, load_plugins\n"
        "p = load_plugins()\n"
        "[p.registry(kind) for kind in REGISTRATION_HOOKS]\n"
        "assert 'codex' in p.registry('harness')\n"
        "print(sorted(m for m in sys.modules if m.startswith('crucible_harness_codex')))\n"
    )
    import sys

    env = crucible_env(CRUCIBLE_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env
    )  # fills the command cache
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    help_imports, registry_imports = done.stdout.strip().splitlines()[-2:]
    assert help_imports == "[]"
    assert registry_imports == "['crucible_harness_codex']"  # the settings class is named by import path
