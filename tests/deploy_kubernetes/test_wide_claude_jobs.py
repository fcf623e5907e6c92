"""A wide round of Claude Code agents as Kubernetes Jobs: the real `crucible run` with backend
"local" and harness "claude", a fake API server, a fake kubelet that runs each pod's script for
real, and the real pinned Claude Code CLI inside those "pods" talking to the scripted model
server. The pods get the model's address from the profile's [tasks.env] and its key from a
Secret ([[tasks.secret_env]]); this machine's key stays here."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy_kubernetes.conftest import task_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.fakes.anthropic_api import FakeAnthropic, Reply, Script, Text, call
from tests.harness_claude.support import MEASURE, claude_cli_path

pytestmark = pytest.mark.claude_cli

NS = "crucible"
LOCAL_KEY = "sk-ant-api03-this-machine-only-5e1d"  # the engine's own key: must never reach the cluster
POD_KEY = "sk-ant-api03-from-the-cluster-secret-77b2"
PROFILE = task_profile(
    """\
log_lines = 3

[tasks.env]
ANTHROPIC_BASE_URL = "{base_url}"
CLAUDE_CODE_MAX_RETRIES = "0"

[[tasks.secret_env]]
name = "ANTHROPIC_API_KEY"
secret = "anthropic"
key = "api-key"
"""
)
MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"
inject = ["measure.sh"]

[agent]
backend = "local"
harness = "claude"
model = "claude-sonnet-4-6"
goal = "Raise the integer in value.txt."
turn_timeout = 60
env = {{ ANTHROPIC_API_KEY = "{local_key}" }}

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
objective = "value"

[search]
wide = 2
approaches = ["double it", "multiply it"]
needs = "gpu"

[deploy]
profile = "profile.toml"
"""
# What the scripted model has each agent do, through the CLI's Bash tool in the pod: check it
# runs in the pod's workdir with a home of its own, then write ten times its candidate number.
EDIT = (
    '[ "$CRUCIBLE_WORKSPACE" = "$(pwd)" ] && [ "$HOME" != "$ORIGINAL_HOME" ] && '
    "echo $((CRUCIBLE_CANDIDATE * 10)) > value.txt"
)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def claude_bin() -> Path:
    path = claude_cli_path()
    if path is None:
        pytest.skip("the Claude Code CLI is not installed: `python3 tasks.py test` installs it into .cache")
    return path


def make_domain(tmp_path: Path, fake: FakeAnthropic) -> Path:
    root = tmp_path / "domain"
    root.mkdir()
    (root / "value.txt").write_text("1\n")
    measure = root / "measure.sh"
    measure.write_text(MEASURE)
    measure.chmod(0o755)
    (root / "profile.toml").write_text(PROFILE.format(base_url=fake.base_url))
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(local_key=LOCAL_KEY))
    return manifest


def _events(manifest: Path) -> list[dict[str, Any]]:
    text = (manifest.parent / "state" / "session.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_wide_round_of_claude_agents_runs_as_jobs_and_the_best_edit_is_kept(
    fake_api: FakeApiServer,
    fake: FakeAnthropic,
    claude_bin: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,
) -> None:
    fake.script = Script(
        [call("Bash", command=EDIT, description="set the value"), Reply([Text("Set the value.")])]
    )
    fake_api.put(
        "secrets",
        {
            "metadata": {"name": "anthropic", "namespace": NS},
            "data": {"api-key": base64.b64encode(POD_KEY.encode()).decode()},
        },
    )
    node = FakeKubelet(fake_api, tmp_path / "node")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    # The kubelet's pods take PATH from here: the "image" has the CLI on its PATH.
    monkeypatch.setenv("PATH", f"{claude_bin.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ORIGINAL_HOME", str(home))  # not forwarded: the pod's check sees it empty
    monkeypatch.setenv("ANTHROPIC_API_KEY", LOCAL_KEY)
    manifest = make_domain(tmp_path, fake)
    checked = cli("check", "--manifest", manifest)
    assert "they run through the kubernetes task runner" in checked.stdout, checked.stdout + checked.stderr
    assert not fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")
    try:
        done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless")
    finally:
        for thread in node.threads:
            thread.join(timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr

    jobs = [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]
    assert len(jobs) == 2
    containers = [job["spec"]["template"]["spec"]["containers"][0] for job in jobs]
    for container in containers:
        env = {e["name"]: e for e in container["env"]}
        command = env["CRUCIBLE_TASK_COMMAND"]["value"]
        assert "'claude' '--print'" in command and "bypassPermissions" in command
        assert env["ANTHROPIC_API_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "anthropic",
            "key": "api-key",
        }
        assert env["ANTHROPIC_BASE_URL"]["value"] == fake.base_url
    posted = json.dumps(jobs) + json.dumps([c["body"] for c in fake_api.calls_to("POST", "/configmaps")])
    assert LOCAL_KEY not in posted and str(home) not in posted  # this machine's key and paths stay here
    assert sorted(ran["CRUCIBLE_CANDIDATE"] for ran in node.ran) == ["1", "2"]

    # Each pod ran the real CLI, which called the model with the cluster's key, never this one.
    steps = fake.message_requests()
    assert len(steps) >= 4  # two candidates, each a tool call and an answer
    assert {r.headers.get("x-api-key") for r in fake.requests} == {POD_KEY}

    events = _events(manifest)
    rows = [e["row"] for e in events if e["kind"] == "row" and e["row"].get("phase") == "wide"]
    assert len(rows) == 2 and all(r["valid"] for r in rows), rows
    assert sorted(r["score"] for r in rows) == [10, 20]
    assert rows[-1]["decision"] == "keep" and rows[-1]["score"] == 20
    assert (manifest.parent / "workspace" / "value.txt").read_text() == "20\n"
    # The turns are judged as on this host: successes with the stream's cost, the agent's
    # tool calls in the session log.
    turns = [e for e in events if e["kind"] == "turn"]
    assert len(turns) == 2 and all(t["ok"] and t["cost"] > 0 for t in turns), turns
    assert all("claude finished" in t["note"] for t in turns)
    agent = [e["event"] for e in events if e["kind"] == "agent"]
    assert sum(1 for a in agent if a.get("tool") == "Bash" or a.get("name") == "Bash") >= 2, agent[:6]
