"""Wide-round proposals as Kubernetes Jobs: the real `crucible run` over a real git workspace, a
fake API server (the real kubernetes client speaks to it) and a fake kubelet that runs each pod's
script for real. The agent is the command backend; its script lives in the workspace, so what it
does in the "pod" (a directory the kubelet lays out from the ConfigMap) comes back only through
the workspace archive the pod prints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import CRUCIBLE, crucible_env
from tests.deploy_kubernetes.conftest import task_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet

NS = "crucible"
PROFILE = task_profile("log_lines = 5\n")
# The proposer, as it runs in the pod: it proves the prompt arrived (file and stdin), that
# CRUCIBLE_WORKSPACE is where it runs, then edits, adds and deletes files.
PROPOSE = """\
set -eu
grep -q "wide-round candidate $CRUCIBLE_CANDIDATE of 3" "$CRUCIBLE_PROMPT_FILE"
grep -q "Lower the cost" -
[ "$CRUCIBLE_WORKSPACE" = "$(pwd)" ]
echo "candidate $CRUCIBLE_CANDIDATE proposing on $(hostname 2>/dev/null || echo a node)"
printf 'cost = %s\\n' "${CRUCIBLE_APPROACH##* }" > program.txt
echo "why candidate $CRUCIBLE_CANDIDATE" > "notes-$CRUCIBLE_CANDIDATE.txt"
rm -f obsolete.txt
"""
MEASURE = """\
import json, pathlib, re
cost = float(re.search(r"cost = (\\S+)", pathlib.Path("program.txt").read_text()).group(1))
print(json.dumps({"valid": True, "score": cost, "note": "cost %g" % cost}))
"""
MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp program.txt obsolete.txt propose.sh workspace/"
inject = ["measure.py"]

[agent]
backend = "command"
agent_cmd = "sh propose.sh"
goal = "Lower the cost in program.txt."
env = {{ AGENT_ONLY_TOKEN = "agent-only-value-7f3a9c" }}

[judge]
measure_cmd = "python3 measure.py"
direction = "lower"

[search]
wide = 3
approaches = ["cost 90", "cost 70", "cost 95"]
needs = {needs}
{deploy}"""
DEPLOY = '\n[deploy]\nprofile = "profile.toml"\n'


def make_domain(tmp_path: Path, *, needs: str = '"gpu"', deploy: str = DEPLOY) -> Path:
    root = tmp_path / "domain"
    root.mkdir()
    (root / "program.txt").write_text("cost = 100\n")
    (root / "obsolete.txt").write_text("to be deleted by every candidate\n")
    (root / "propose.sh").write_text(PROPOSE)
    (root / "measure.py").write_text(MEASURE)
    (root / "profile.toml").write_text(PROFILE)
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(needs=needs, deploy=deploy))
    return manifest


@pytest.fixture
def kubelet(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeKubelet]:
    node = FakeKubelet(fake_api, tmp_path / "node")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("LOCAL_ONLY_SETTING", "never-leaves-this-machine")
    yield node
    for thread in node.threads:
        thread.join(timeout=10)


def _events(manifest: Path) -> list[dict[str, Any]]:
    text = (manifest.parent / "state" / "session.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _wide_rows(manifest: Path) -> list[dict[str, Any]]:
    return [e["row"] for e in _events(manifest) if e["kind"] == "row" and e["row"].get("phase") == "wide"]


def _posted_jobs(fake_api: FakeApiServer) -> list[dict[str, Any]]:
    return [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]


def _kept_files(manifest: Path) -> list[str]:
    done = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD"],
        cwd=manifest.parent / "workspace",
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def _assert_best_kept(manifest: Path) -> None:
    rows = _wide_rows(manifest)
    assert len(rows) == 3 and all(r["valid"] for r in rows), rows
    last = rows[-1]
    assert last["decision"] == "keep" and last["score"] == 70
    assert last["note"].startswith("wide round decided: candidate 2")
    workspace = manifest.parent / "workspace"
    assert (workspace / "program.txt").read_text() == "cost = 70\n"
    assert (workspace / "notes-2.txt").read_text() == "why candidate 2\n"
    kept = _kept_files(manifest)  # the keep commit: the edit, the added file, the deletion
    assert "notes-2.txt" in kept and "obsolete.txt" not in kept and "notes-1.txt" not in kept


def test_a_wide_round_fans_out_as_jobs_and_the_best_candidate_comes_back_and_is_kept(
    fake_api: FakeApiServer, kubelet: FakeKubelet, tmp_path: Path, cli
) -> None:
    manifest = make_domain(tmp_path)
    checked = cli("check", "--manifest", manifest)
    assert (
        "the proposals need 'gpu', which this machine lacks: they run through the kubernetes"
        in checked.stdout
    )
    assert not _posted_jobs(fake_api)  # check touched nothing in the cluster
    done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless")
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = _posted_jobs(fake_api)
    assert len(jobs) == 3
    envs = [
        {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        for job in jobs
    ]
    assert sorted(env["CRUCIBLE_CANDIDATE"] for env in envs) == ["1", "2", "3"]
    assert all(env["CRUCIBLE_TASK_COMMAND"] == "sh propose.sh" for env in envs)
    assert all(env["CRUCIBLE_TASK_STDIN_ENV"] == "CRUCIBLE_PROMPT_FILE" for env in envs)
    assert all(
        job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
        for job in jobs
    )
    posted = json.dumps(jobs) + json.dumps([c["body"] for c in fake_api.calls_to("POST", "/configmaps")])
    assert "never-leaves-this-machine" not in posted  # this machine's environment stays here
    assert "agent-only-value-7f3a9c" not in posted  # and so does [agent].env
    assert "gitdir:" not in posted  # the fork's pointer into the state directory is not shipped
    assert not [k for k in fake_api.objects if k[0] == "configmaps"]  # every pack is cleaned up
    _assert_best_kept(manifest)
    notes = [e["msg"] for e in _events(manifest) if e["kind"] == "note"]
    assert any("proposals need 'gpu'" in n and "kubernetes task runner" in n for n in notes)
    assert sum("its workspace came back" in n for n in notes) == 3
    assert any("proposing on" in n for n in notes)  # the pod's log reached the session log


def test_an_evicted_proposal_is_proposed_again_in_a_new_job(
    fake_api: FakeApiServer, kubelet: FakeKubelet, tmp_path: Path, cli
) -> None:
    kubelet.script = ["evict"]
    manifest = make_domain(tmp_path)
    done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(_posted_jobs(fake_api)) == 4  # one Job evicted, tried again
    _assert_best_kept(manifest)


def test_with_the_capability_declared_here_the_proposals_run_here_and_no_job_is_made(
    fake_api: FakeApiServer, kubelet: FakeKubelet, tmp_path: Path, cli
) -> None:
    manifest = make_domain(tmp_path)
    done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless", "--cap", "gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not _posted_jobs(fake_api) and not fake_api.calls_to("GET", "/jobs")
    _assert_best_kept(manifest)


@pytest.mark.parametrize(
    ("needs", "deploy", "extra", "words"),
    [
        ('"gpu"', "", (), "[search].needs = 'gpu': this run does not declare it (--cap) and no task runner"),
        ('["gpu"]', "", (), "a [deploy] profile whose [tasks].capabilities lists 'gpu'"),
        ('"a100"', DEPLOY, (), "no task runner serves it"),
        (
            '"gpu"',
            DEPLOY,
            ("--harness", "anthropic"),
            "and the local (harness anthropic) backend cannot: its turn is not one",
        ),
    ],
)
def test_proposals_that_can_run_nowhere_are_refused_before_anything_starts(
    fake_api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,
    needs: str,
    deploy: str,
    extra: tuple[str, ...],
    words: str,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    manifest = make_domain(tmp_path, needs=needs, deploy=deploy)
    if extra:  # an agent loop in this process (the SDK harness): its turn is not one command
        text = manifest.read_text().replace('backend = "command"', 'backend = "local"')
        manifest.write_text(text)
    done = cli("run", "--manifest", manifest, "--iterations", "0", "--ui", "headless", *extra)
    assert done.returncode == 10, done.stdout + done.stderr
    assert words in done.stderr and "--cap" in done.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()
    assert not _posted_jobs(fake_api)


def test_aborting_the_run_mid_round_deletes_every_proposal_job(
    fake_api: FakeApiServer, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    kubelet.script = ["hang", "hang", "hang"]
    manifest = make_domain(tmp_path)
    env = crucible_env(KUBECONFIG=str(tmp_path / "kubeconfig"))
    argv = [str(CRUCIBLE), "run", "--manifest", str(manifest), "--iterations", "0", "--ui", "headless"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # until the three pods run (bounded: 60 s)
            pods = [v for k, v in fake_api.objects.items() if k[0] == "pods"]
            if len(pods) == 3 and all(p.get("status", {}).get("phase") == "Running" for p in pods):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the proposals' pods never started")
        os.kill(proc.pid, signal.SIGINT)  # a stop waits for the round; the second one aborts it
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3 and "Traceback" not in err, err
    for job in _posted_jobs(fake_api):
        assert fake_api.calls_to("DELETE", f"/jobs/{job['metadata']['name']}")
    assert not [k for k in fake_api.objects if k[0] in ("jobs", "configmaps")]
    assert _events(manifest)[-1]["kind"] == "shutdown"
