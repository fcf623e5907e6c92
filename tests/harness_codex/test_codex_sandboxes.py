"""Codex turns away from the host: in an OpenShell sandbox (the test gateway) and written out for a task pod.

In a sandbox the credential is resolved on the engine host and seeded as the CLI's auth file;
the sandbox's environment never holds it, and the sandbox may reach OpenAI's hosts because the
harness asks for them (a claude sandbox's allowlist does not carry them). A pod's command is
written into a Job, so it carries no credential at all: the pod's own environment has the key.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from crucible_backend_local.backends import SendableLocalBackend
from crucible_backend_openshell.backend import OpenShellBackend
from crucible_backend_openshell.egress import resolve_egress
from crucible_backend_openshell.gateway import policy_message
from crucible_core import process
from crucible_core.manifest.loader import load_manifest
from crucible_core.protocols import FailureClass
from crucible_core.session_log import read_events
from crucible_harness_claude.cli_harness import ClaudeCodeHarness
from crucible_harness_codex.cli_harness import CodexHarness
from crucible_harness_codex.settings import SANDBOX_HOSTS
from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import IMAGE, sandbox_path
from tests.cli_support import run_crucible
from tests.fakes.openai_responses import FakeResponses, Reply, Script, Text, shell
from tests.harness_claude.support import Recorder, make_turn, write_domain
from tests.harness_claude.support import harness_context as claude_context
from tests.harness_codex.support import TEST_MODEL, harness_context
from tests.harness_codex.test_codex_runs import KEY, engine_env

pytestmark = pytest.mark.codex_cli

EDIT = Script([shell("echo 2 > value.txt"), Reply([Text("Raised the value.")])])


@pytest.fixture
def gateway(tmp_path: Path, codex_cli: Path) -> Iterator[FakeGateway]:
    root = tmp_path / "gateway"
    root.mkdir()
    with FakeGateway(root, path=sandbox_path(codex_cli.parent)) as server:
        yield server


def openshell_codex_domain(root: Path, fake: FakeResponses, gateway: FakeGateway) -> Path:
    manifest = write_domain(root, {"OPENAI_BASE_URL": fake.base_url}, harness="codex")
    text = manifest.read_text().replace(
        'backend = "local"', f'backend = "openshell"\nsandbox_image = "{IMAGE}"'
    )
    text += f'\n[agent.openshell]\ngateway = "{gateway.address}"\n'
    text += f'\n[agent.codex]\nmodel = "{TEST_MODEL}"\nauth = "api"\napi_key = "WORK"\n'
    manifest.write_text(text)
    return manifest


def test_the_counter_runs_a_codex_turn_in_a_sandbox_seeded_from_the_engine(
    fake: FakeResponses, gateway: FakeGateway, codex_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = openshell_codex_domain(domain, fake, gateway)
    fake.script = EDIT

    # Without the key the run is refused before any sandbox is made (the CLI is the image's).
    keyless = {k: v for k, v in engine_env(codex_cli).items() if k != "OPENAI_API_KEY_WORK"}
    refused = run_crucible("--manifest", manifest, "-n", "1", "--ui", "headless", env=keyless)
    assert refused.returncode != 0 and "export OPENAI_API_KEY_WORK=<key>" in refused.stderr
    assert gateway.requests("CreateSandbox") == [] and fake.requests == []

    check = run_crucible("check", "--manifest", manifest, env=engine_env(codex_cli))
    assert check.returncode == 0, check.stdout + check.stderr
    for host in SANDBOX_HOSTS:  # the disclosure states the harness's reach
        assert f"{host}:443 full (builtin)" in check.stdout, check.stdout

    done = run_crucible("--manifest", manifest, "-n", "1", "--ui", "headless", env=engine_env(codex_cli))
    assert done.returncode == 0, done.stderr
    events = list(read_events(domain / "state" / "session.jsonl"))
    assert [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"] == [
        ("baseline", 1),
        ("keep", 2),
    ]
    agent = [e["event"] for e in events if e["kind"] == "agent"]
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["shell"]

    (create,) = gateway.requests("CreateSandbox")
    rule = create.spec.policy.network_policies["crucible"]
    hosts = [(e.host, e.port) for e in rule.endpoints]
    port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
    for host in SANDBOX_HOSTS:
        assert (host, 443) in hosts
    assert ("127.0.0.1", port) in hosts  # the custom endpoint's host, added for this harness
    assert "/usr/local/bin/codex" in [b.path for b in rule.binaries]
    [agent_exec] = [r for r in gateway.requests("ExecSandbox") if "exec" in r.command[1:2]]
    assert agent_exec.environment["CODEX_HOME"] == "/sandbox/.codex"
    assert KEY not in str(dict(agent_exec.environment)) and KEY not in " ".join(agent_exec.command)
    # The key reached the CLI through its seeded auth file only.
    assert fake.model_requests()[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in (domain / "state" / "session.jsonl").read_text()
    assert gateway.sandboxes == {}


def test_a_claude_sandbox_allowlist_carries_nothing_of_codex(tmp_path: Path, private_dir: Path) -> None:
    manifest = tmp_path / "crucible.toml"
    manifest.write_text(
        '[repo]\npath = "."\n[agent]\nbackend = "openshell"\nsandbox_image = "img:1"\n'
        '[agent.openshell]\ngateway = "127.0.0.1:1"\n[judge]\nmeasure_cmd = "true"\ndirection = "higher"\n'
    )
    loaded = load_manifest(manifest)
    table = loaded.settings.of("backend")

    def backend_for(harness: object) -> OpenShellBackend:
        context = types.SimpleNamespace(
            settings=table,
            agent=loaded.manifest.agent,
            workspace=tmp_path,
            private_dir=private_dir,
            harness_name="h",
            resolve_harness=lambda name: harness,
        )
        return OpenShellBackend.from_context(context)  # type: ignore[arg-type]

    claude = backend_for(ClaudeCodeHarness.from_context(claude_context(tmp_path, private_dir)))
    codex = backend_for(CodexHarness.from_context(harness_context(private_dir)))
    # Byte for byte what a claude sandbox got before the codex harness existed.
    assert policy_message(claude.resolved_egress()) == policy_message(resolve_egress(table.openshell))
    codex_hosts = {e.host for e in codex.resolved_egress().endpoints}
    assert set(SANDBOX_HOSTS) <= codex_hosts
    assert not set(SANDBOX_HOSTS) & {e.host for e in claude.resolved_egress().endpoints}


def test_a_pod_turn_carries_no_credential_and_runs_on_the_pods_own_key(
    fake: FakeResponses, codex_cli: Path, private_dir: Path, tmp_path: Path
) -> None:
    fake.script = EDIT
    work, scratch = tmp_path / "pod-work", tmp_path / "pod-tmp"
    work.mkdir()
    scratch.mkdir()
    (work / "value.txt").write_text("1\n")
    local = {
        "OPENAI_API_KEY_WORK": KEY,
        "CRUCIBLE_CODEX_BIN": str(codex_cli),
        "OPENAI_BASE_URL": fake.base_url,
        "CRUCIBLE_WORKSPACE": str(work),
    }
    codex = CodexHarness.from_context(
        harness_context(private_dir, model=TEST_MODEL, auth="api", api_key="WORK")
    )
    recorder = Recorder()
    shell_turn = SendableLocalBackend(codex).shell_turn(make_turn(work, local, recorder))
    for secret in (KEY, str(codex_cli), fake.base_url, str(work)):
        assert secret not in shell_turn.command

    # The pod: the deploy profile gives it the key under the selected name, and its endpoint.
    pod_env = {
        "PATH": sandbox_path(codex_cli.parent),
        "TMPDIR": str(scratch),
        "OPENAI_API_KEY_WORK": KEY,
        "OPENAI_BASE_URL": fake.base_url,
    }
    done = process.run(
        ["sh", "-c", shell_turn.command], cwd=work, env=pod_env, timeout=120, stdin_data=shell_turn.stdin
    )
    result = shell_turn.finish(done)
    assert result.ok, result.note + done.stderr[-2000:]
    assert (work / "value.txt").read_text() == "2\n"
    assert "agent_tool_call" in recorder.kinds() and not list(scratch.iterdir())
    assert fake.model_requests()[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_pod_turn_refuses_the_chatgpt_sign_in(private_dir: Path, tmp_path: Path) -> None:
    codex = CodexHarness.from_context(harness_context(private_dir, auth="chatgpt"))
    shell_turn = SendableLocalBackend(codex).shell_turn(make_turn(tmp_path, {}, Recorder()))
    result = shell_turn.finish(process.Completed(1, "", "", False, 0.0))
    assert not result.ok and result.failure is FailureClass.SPAWN
    assert "only the engine mints" in result.note and "OPENAI_API_KEY" in result.note
