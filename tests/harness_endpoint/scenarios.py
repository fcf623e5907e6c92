"""Whole runs the opencode and pi tests both make, each with its own CLI: the counter kept without a
leak, and the counter kept in an OpenShell sandbox with a key only the gateway holds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from crucible_backend_openshell.egress import resolve_egress
from crucible_backend_openshell.gateway import policy_message
from crucible_core.broker.reach import EgressEndpoint, EgressReach
from crucible_core.manifest.loader import load_manifest
from crucible_core.session_log import read_events
from tests.backend_openshell.fake_gateway import FakeGateway
from tests.backend_openshell.support import IMAGE, sandbox_path
from tests.cli_support import crucible_env, run_crucible
from tests.fakes.anthropic_api import Reply, Script, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.support import (
    BIN_ENV,
    MODEL,
    PER_CALL,
    TEST_KEY,
    agent_events,
    assert_no_secret_written,
    edit_script,
    endpoint_env,
    write_domain,
)

# Variables of the developer's own shell that would hand these turns a key the test did not.
_ENDPOINT_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def engine_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in crucible_env().items() if k not in _ENDPOINT_VARIABLES}
    env.update(extra)
    return env


def crucible_run(
    manifest: Path, harness: str, cli: Path, tmp: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`crucible run` with the harness's CLI named; TMPDIR is `tmp`, where a turn's home lives while it runs."""
    env = engine_env(**{BIN_ENV[harness]: str(cli), "TMPDIR": str(tmp)})
    return run_crucible("--manifest", manifest, "--ui", "headless", *args, env=env, timeout=600)


def counter_kept_without_a_leak(
    harness: str, cli: Path, fake: FakeOpenAIChat, tmp_path: Path, bash: Reply
) -> None:
    """One iteration of the counter: the CLI runs `bash` (echoing a secret), edits value.txt and
    answers quoting every secret; the edit is kept, its events and cost are in the log, and no
    secret is in any text the run wrote or printed, in any form."""
    api_key = f"sk-proj-canary-{harness}-key-7f3a9c1e5b"
    env_secret = "canary-env-value-Q9xZ7w2L"  # no secret shape: only its exact value gives it away
    shaped = "sk-proj-canary-reply-4d8e2b6a0c99"  # never handed out: caught by its shape
    domain = tmp_path / "domain"
    value = domain / "workspace" / "value.txt"
    edits = edit_script(harness, value)
    fake.script = Script(
        [
            bash,
            *edits.replies[:2],
            say(f"Done. The token was {env_secret}; a key: {shaped}; the api key {api_key}."),
        ]
    )
    manifest = write_domain(
        domain, harness, endpoint_env(fake, OPENAI_API_KEY=api_key, CANARY_TOKEN=env_secret)
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    done = crucible_run(manifest, harness, cli, tmp, "--iterations", "1")
    assert done.returncode == 0, done.stderr

    events = list(read_events(domain / "state" / "session.jsonl"))
    [start] = [e for e in events if e["kind"] == "start"]
    assert start["harness"] == harness
    rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
    assert rows == [("baseline", 1), ("keep", 2)]
    assert value.read_text() == "2\n"
    agent = agent_events(events)
    assert agent[0]["kind"] == "init" and (agent[0]["harness"], agent[0]["model"]) == (harness, MODEL)
    assert [e["name"] for e in agent if e["kind"] == "tool" and "input" in e] == ["bash", "read", "edit"]
    [tokens] = [e for e in agent if e["kind"] == "tokens"]
    assert (tokens["input"], tokens["output"]) == (4 * 1200, 4 * 80)
    [result] = [e for e in agent if e["kind"] == "result"]
    assert not result["is_error"] and result["turns"] == 4
    [turn] = [e for e in events if e["kind"] == "turn"]
    assert turn["ok"] and turn["cost"] == pytest.approx(4 * PER_CALL) == tokens["cost_usd"]

    # The model really got the key and the secret (so the scan is not vacuous) ...
    steps = fake.chat_requests()
    assert steps and all(r.headers["authorization"] == f"Bearer {api_key}" for r in steps)
    assert env_secret in json.dumps(steps[-1].body["messages"])
    # ... and nothing the run wrote or printed holds any of them: the evidence is there, masked.
    assert_no_secret_written(domain, (api_key, env_secret, shaped), done.stdout, done.stderr)
    bash_result = next(e for e in agent if e["kind"] == "tool" and "result" in e)
    assert "token is [REDACTED]" in bash_result["result"]
    # The turn's home (the CLI's config, its store, its unpacked libraries) did not outlive it.
    assert list(tmp.iterdir()) == []


def kept_in_a_sandbox(
    harness: str, cli: Path, fake: FakeOpenAIChat, tmp_path: Path, binaries: tuple[str, ...]
) -> None:
    """The counter with backend = "openshell": the key is the gateway's, injected into the sandbox as
    a provider credential, and the turn's own first lines seed the CLI from it there. The sandbox's
    egress is the built-ins plus what this harness's turns need: the endpoint [agent].env names
    (and api.openai.com), and `binaries`."""
    gateway_root = tmp_path / "gateway"
    gateway_root.mkdir()
    providers = {"endpoint": {"OPENAI_API_KEY": TEST_KEY}}
    with FakeGateway(gateway_root, path=sandbox_path(cli.parent), providers=providers) as gateway:
        domain = tmp_path / "domain"
        manifest = write_domain(domain, harness, {"OPENAI_BASE_URL": fake.base_url})
        fake.script = edit_script(harness, gateway_root / "sandbox" / "workspace" / "value.txt")
        text = manifest.read_text().replace(
            'backend = "local"', f'backend = "openshell"\nsandbox_image = "{IMAGE}"'
        )
        text += f'\n[agent.openshell]\ngateway = "{gateway.address}"\nproviders = ["endpoint"]\n'
        manifest.write_text(text)

        done = run_crucible(
            "--manifest", manifest, "-n", "1", "--ui", "headless", env=engine_env(), timeout=600
        )
        assert done.returncode == 0, done.stderr

        events = list(read_events(domain / "state" / "session.jsonl"))
        rows = [(e["row"]["decision"], e["row"]["score"]) for e in events if e["kind"] == "row"]
        assert rows == [("baseline", 1), ("keep", 2)]
        [turn] = [e for e in events if e["kind"] == "turn"]
        assert turn["cost"] == pytest.approx(3 * PER_CALL)
        assert all(r.headers["authorization"] == f"Bearer {TEST_KEY}" for r in fake.chat_requests())
        (create,) = gateway.requests("CreateSandbox")
        table = load_manifest(manifest).settings.of("backend").openshell
        port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
        needed = EgressReach(
            restricted=True,
            endpoints=(
                EgressEndpoint("api.openai.com", 443, "full", "built-in"),
                EgressEndpoint("127.0.0.1", port, "full", "built-in"),
            ),
            binaries=binaries,
        )
        assert create.spec.policy == policy_message(resolve_egress(table, (), needed))
        assert TEST_KEY.encode() not in b"".join(r.SerializeToString() for _, r in gateway.calls)
        assert gateway.sandboxes == {}
