"""Whole `crucible run`s with backend = "openshell": the real Claude Code CLI in test-gateway sandboxes.

The domain is the harness tests' counter (value.txt is the score); only the manifest's
[agent] settings differ from the local backend's, which is the point: flipping local and
openshell is configuration.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_backend_openshell.egress import resolve_egress
from crucible_backend_openshell.gateway import policy_message
from crucible_core.manifest.loader import load_manifest
from crucible_core.session_log import read_events
from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import IMAGE, sandbox_path
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.fakes.anthropic_api import STALL, FakeAnthropic, Script, call, say
from tests.harness_claude.support import TEST_KEY, claude_cli_path, wait_for, write_domain

pytestmark = pytest.mark.claude_cli

CANARY = "engine-only-canary-secret-4b9e2d7a"


@pytest.fixture
def claude_cli() -> Path:
    path = claude_cli_path()
    if path is None:
        pytest.skip(
            "the Claude Code CLI is not installed (`python3 tasks.py test` installs it under .cache/)"
        )
    return path


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def gateway(tmp_path: Path, claude_cli: Path) -> Iterator[FakeGateway]:
    root = tmp_path / "gateway"
    root.mkdir()
    # The model key is the gateway's: it reaches the sandbox as a provider credential.
    providers = {"anthropic": {"ANTHROPIC_API_KEY": TEST_KEY}}
    with FakeGateway(root, path=sandbox_path(claude_cli.parent), providers=providers) as server:
        yield server


def openshell_domain(root: Path, fake: FakeAnthropic, gateway: FakeGateway) -> Path:
    env = {"ANTHROPIC_BASE_URL": fake.base_url, "CLAUDE_CODE_MAX_RETRIES": "0"}
    manifest = write_domain(root, env)
    port = fake.base_url.rsplit(":", 1)[1].strip("/")
    text = manifest.read_text().replace(
        'backend = "local"', f'backend = "openshell"\nsandbox_image = "{IMAGE}"'
    )
    text += (
        f'\n[agent.openshell]\ngateway = "{gateway.address}"\n'
        f'endpoints = ["127.0.0.1:{port}:full"]\nproviders = ["anthropic"]\n'
    )
    manifest.write_text(text)
    return manifest


def edit_script(gateway: FakeGateway) -> Script:
    value = gateway.root / "sandbox" / "workspace" / "value.txt"  # where /sandbox/workspace lands
    return Script(
        [
            call("Read", file_path=str(value)),
            call("Edit", file_path=str(value), old_string="1", new_string="2"),
            say("Raised it."),
        ]
    )


def engine_env() -> dict[str, str]:
    return crucible_env(AWS_SECRET_ACCESS_KEY=CANARY)


def agent_execs(gateway: FakeGateway) -> list:
    return [r for r in gateway.requests("ExecSandbox") if r.command[0] == "claude"]


def test_the_counter_runs_a_claude_turn_in_a_sandbox_and_keeps_it(
    fake: FakeAnthropic, gateway: FakeGateway, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = openshell_domain(domain, fake, gateway)
    fake.script = edit_script(gateway)

    check = run_crucible("check", "--manifest", manifest, env=engine_env())
    assert check.returncode == 0, check.stdout + check.stderr
    assert "backend openshell: sandbox image ghcr.io/crucible/test-sandbox:1" in check.stdout
    assert f"127.0.0.1:{fake.base_url.rsplit(':', 1)[1].strip('/')}:full (manifest)" in check.stdout
    assert "api.anthropic.com:443:full (builtin)" in check.stdout

    done = run_crucible("--manifest", manifest, "-n", "1", "--ui", "headless", env=engine_env())
    assert done.returncode == 0, done.stderr
    events = list(read_events(domain / "state" / "session.jsonl"))
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert (domain / "workspace" / "value.txt").read_text() == "2\n"
    agent = [e["event"] for e in events if e["kind"] == "agent"]  # streamed back as they came
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["Read", "Edit"]

    (create,) = gateway.requests("CreateSandbox")
    table = load_manifest(manifest).settings.of("backend").openshell
    assert create.spec.policy == policy_message(resolve_egress(table))  # exactly the resolved egress
    (agent,) = agent_execs(gateway)
    assert agent.environment["IS_SANDBOX"] == "1" and "bypassPermissions" in agent.command
    assert agent.workdir == "/sandbox/workspace"
    assert [r.name for r in gateway.requests("DeleteSandbox")] == [create.name]
    assert gateway.sandboxes == {}
    wire = b"".join(request.SerializeToString() for _, request in gateway.calls)
    assert CANARY.encode() not in wire and TEST_KEY.encode() not in wire

    # Flipping back to the local backend is configuration: the openshell table is set aside.
    local = manifest.read_text().replace('backend = "openshell"', 'backend = "local"')
    manifest.write_text(local)
    flipped = run_crucible("check", "--manifest", manifest, env=engine_env())
    assert "backend=local harness=claude" in flipped.stdout, flipped.stdout + flipped.stderr
    assert "not used by this run" in flipped.stdout


def test_a_gateway_outage_does_not_spend_the_iteration(
    fake: FakeAnthropic, gateway: FakeGateway, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = openshell_domain(domain, fake, gateway)
    gateway.fail = "unavailable"
    done = run_crucible("--manifest", manifest, "-n", "1", "--ui", "headless", env=engine_env())
    events = list(read_events(domain / "state" / "session.jsonl"))
    notes = [e["msg"] for e in events if e["kind"] == "note"]
    assert any("agent transport failed" in n and "not counted" in n for n in notes), notes
    assert [e["row"]["decision"] for e in events if e["kind"] == "row"] == ["baseline"]  # no iteration spent
    assert done.returncode != 0 or "giving up" in " ".join(notes)


def _start(manifest: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "-n", "1", "--ui", "headless", *extra],
        env=engine_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_engine_sigkill_leaves_a_sandbox_that_resume_deletes(
    fake: FakeAnthropic, gateway: FakeGateway, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = openshell_domain(domain, fake, gateway)
    fake.script = Script([STALL])
    engine = _start(manifest)
    try:
        assert wait_for(lambda: bool(agent_execs(gateway)) and bool(fake.message_requests()), seconds=90)
        (left,) = list(gateway.sandboxes)
    finally:
        engine.kill()
        engine.communicate(timeout=30)
    assert left in gateway.sandboxes  # nobody deleted it: the engine died mid-turn

    fake.script = edit_script(gateway)
    resumed = run_crucible(
        "--manifest", manifest, "-n", "1", "--resume", "--ui", "headless", env=engine_env()
    )
    assert resumed.returncode == 0, resumed.stderr
    deleted = [r.name for r in gateway.requests("DeleteSandbox")]
    assert deleted[0] == left  # swept at run start, before the resumed turn
    assert gateway.sandboxes == {}
    events = read_events(domain / "state" / "session.jsonl")
    rows = [e["row"]["decision"] for e in events if e["kind"] == "row"]
    assert rows[-1] == "keep"


def test_engine_sigterm_mid_turn_deletes_the_sandbox(
    fake: FakeAnthropic, gateway: FakeGateway, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = openshell_domain(domain, fake, gateway)
    fake.script = Script([STALL])
    engine = _start(manifest)
    try:
        assert wait_for(lambda: bool(agent_execs(gateway)) and bool(fake.message_requests()), seconds=90)
        (live,) = list(gateway.sandboxes)
        # The first SIGTERM asks for a stop at the next iteration head; a later one aborts the
        # turn. Signals that arrive together count once, so repeat until the engine exits.
        for _ in range(60):
            engine.send_signal(signal.SIGTERM)
            if wait_for(lambda: engine.poll() is not None, seconds=0.5):
                break
        engine.communicate(timeout=60)
    finally:
        if engine.poll() is None:
            os.kill(engine.pid, signal.SIGKILL)
    assert live in [r.name for r in gateway.requests("DeleteSandbox")]
    assert gateway.sandboxes == {}
    shutdown = [e for e in read_events(domain / "state" / "session.jsonl") if e["kind"] == "shutdown"]
    assert shutdown and shutdown[-1]["outcome"] == "stopped"
