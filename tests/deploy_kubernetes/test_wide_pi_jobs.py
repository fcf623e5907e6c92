"""A wide round of pi agents as Kubernetes Jobs: the real `crucible run` with backend "local" and harness
"pi", a fake API server, a fake kubelet that runs each pod's script for real, and the real pinned pi
CLI inside those "pods" talking to the scripted endpoint. The pods get the endpoint from the
profile's [tasks.env] and its key from a Secret ([[tasks.secret_env]]): the turn's first lines seed
pi's models.json from them there. This machine's key stays here."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy_kubernetes.conftest import task_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.fakes.anthropic_api import Script, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_claude.support import MEASURE
from tests.harness_endpoint.support import require_cli

pytestmark = pytest.mark.pi_cli

NS = "crucible"
LOCAL_KEY = "sk-proj-this-machine-only-2c8d1f"
POD_KEY = "sk-proj-from-the-cluster-secret-9a4e"
PROFILE = task_profile(
    """\
log_lines = 3

[tasks.env]
OPENAI_BASE_URL = "{base_url}"

[[tasks.secret_env]]
name = "OPENAI_API_KEY"
secret = "endpoint"
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
harness = "pi"
model = "gpt-4.1"
goal = "Raise the integer in value.txt."
turn_timeout = 120
env = {{ OPENAI_API_KEY = "{local_key}", OPENAI_BASE_URL = "http://127.0.0.1:9/v1" }}

[agent.broker]
enabled = false

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
# Through pi's bash tool in the pod: it runs in the pod's workdir with a home of its own.
EDIT = (
    '[ "$CRUCIBLE_WORKSPACE" = "$(pwd)" ] && [ "$HOME" != "$ORIGINAL_HOME" ] && '
    "echo $((CRUCIBLE_CANDIDATE * 10)) > value.txt"
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat() as server:
        yield server


def test_a_wide_round_of_pi_agents_runs_as_jobs_with_the_clusters_key(
    fake_api: FakeApiServer, fake: FakeOpenAIChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    pi = require_cli("pi")
    fake.script = Script([call("bash", command=EDIT), say("Set the value.")])
    secret = {"api-key": base64.b64encode(POD_KEY.encode()).decode()}
    fake_api.put("secrets", {"metadata": {"name": "endpoint", "namespace": NS}, "data": secret})
    node = FakeKubelet(fake_api, tmp_path / "node")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("PATH", f"{pi.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ORIGINAL_HOME", str(home))
    root = tmp_path / "domain"
    root.mkdir()
    (root / "value.txt").write_text("1\n")
    (root / "measure.sh").write_text(MEASURE)
    (root / "measure.sh").chmod(0o755)
    (root / "profile.toml").write_text(PROFILE.format(base_url=fake.base_url))
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(local_key=LOCAL_KEY))

    try:
        done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless")
    finally:
        for thread in node.threads:
            thread.join(timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr

    jobs = [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]
    assert len(jobs) == 2
    posted = json.dumps(jobs) + json.dumps([c["body"] for c in fake_api.calls_to("POST", "/configmaps")])
    assert LOCAL_KEY not in posted and str(home) not in posted
    # Each pod's pi called the endpoint with the cluster's key, never this machine's.
    assert len(fake.chat_requests()) >= 4
    assert {r.headers.get("authorization") for r in fake.requests} == {f"Bearer {POD_KEY}"}

    events = [json.loads(line) for line in (root / "state" / "session.jsonl").read_text().splitlines()]
    rows = [e["row"] for e in events if e["kind"] == "row" and e["row"].get("phase") == "wide"]
    assert sorted(r["score"] for r in rows) == [10, 20] and rows[-1]["decision"] == "keep"
    assert (root / "workspace" / "value.txt").read_text() == "20\n"
    turns = [e for e in events if e["kind"] == "turn"]
    assert len(turns) == 2 and all(t["ok"] and t["cost"] > 0 and "pi finished" in t["note"] for t in turns), (
        turns
    )
