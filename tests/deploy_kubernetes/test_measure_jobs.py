"""The judge's measure as a Kubernetes Job: `crucible run` with `[judge].needs = "gpu"`, a deploy
profile, the fake API server (the real kubernetes client speaks to it) and the fake kubelet,
which really runs each pod's command on the workspace the Job shipped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import CRUCIBLE, crucible_env
from tests.deploy_kubernetes.conftest import EXAMPLE, task_profile
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.deploy_kubernetes.test_render import _validate

NS = "crucible"
# Where it ran is part of the note: in a pod the script runs in the workdir the Job laid out.
MEASURE = """\
#!/bin/sh
where=here
if [ -n "${CRUCIBLE_TASK_WORKDIR:-}" ] && [ "$PWD" = "$CRUCIBLE_TASK_WORKDIR" ]; then where=pod; fi
n=$(cat value.txt)
echo "measuring value $n on $where" >&2
echo "{\\"valid\\": true, \\"score\\": $n, \\"note\\": \\"value $n on $where, best ${CRUCIBLE_BEST_SCORE:-none}\\"}"
"""
MANIFEST = """\
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"
inject = ["measure.sh"]

[agent]
backend = "command"
agent_cmd = "n=$(cat value.txt); echo $((n + 1)) > value.txt"
goal = "Raise the value."

[judge]
measure_cmd = "sh measure.sh"
direction = "higher"
{needs}
{deploy}
"""
DEPLOY = '[deploy]\nprofile = "profile.toml"\n'


@pytest.fixture
def domain(
    fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    root = tmp_path / "domain"
    root.mkdir()
    (root / "value.txt").write_text("1\n")
    (root / "measure.sh").write_text(MEASURE)
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("LOCAL_ONLY_SETTING", "never-leaves-this-machine")
    yield {"root": root, "kubelet": kubelet, "dir": tmp_path}
    for thread in kubelet.threads:
        thread.join(timeout=10)


def _write(
    domain: dict[str, Any], *, needs: str = 'needs = "gpu"', deploy: str = DEPLOY, extra: str = ""
) -> Path:
    root = domain["root"]
    (root / "profile.toml").write_text(task_profile(extra))
    manifest = root / "crucible.toml"
    manifest.write_text(MANIFEST.format(needs=needs, deploy=deploy))
    return manifest


def _events(manifest: Path) -> list[dict[str, Any]]:
    lines = (manifest.parent / "state" / "session.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _rows(manifest: Path) -> list[dict[str, Any]]:
    return [e["row"] for e in _events(manifest) if e["kind"] == "row"]


def _notes(manifest: Path) -> list[str]:
    return [e["msg"] for e in _events(manifest) if e["kind"] == "note"]


def _posted_jobs(fake_api: FakeApiServer) -> list[dict[str, Any]]:
    return [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]


def _left(fake_api: FakeApiServer, plural: str) -> list[Any]:
    return [key for key in fake_api.objects if key[0] == plural]


def test_each_measure_of_a_judge_needing_a_gpu_runs_as_a_job_on_the_candidate(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain)
    done = cli("run", "--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(manifest)
    # the baseline and both candidates were measured in pods, each on its own candidate
    assert [(r["iter"], r["score"], r["decision"]) for r in rows] == [
        (0, 1, "baseline"),
        (1, 2, "keep"),
        (2, 3, "keep"),
    ]
    assert [r["note"] for r in rows] == [
        "value 1 on pod, best none",
        "value 2 on pod, best 1",
        "value 3 on pod, best 2",
    ]
    jobs = _posted_jobs(fake_api)
    assert len(jobs) == 3
    for job in jobs:
        _validate(job)
        assert job["spec"]["template"]["metadata"]["labels"]["crucible.dev/task"] == "measure"
        env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "LOCAL_ONLY_SETTING" not in env and "KUBECONFIG" not in env
        assert env["CRUCIBLE_TASK_COMMAND"] == "sh measure.sh"
    # the engine's numbers reach the measure in the pod, and nothing else of this machine's env
    ran = domain["kubelet"].ran
    assert [env.get("CRUCIBLE_BEST_SCORE") for env in ran] == [None, "1", "2"]
    assert "LOCAL_ONLY_SETTING" not in ran[-1]
    notes = _notes(manifest)
    assert "the judge needs 'gpu': each measure runs on kubernetes" in notes
    assert any(n.startswith("task measure | measuring value 2 on pod") for n in notes)  # the pod log
    assert not _left(fake_api, "configmaps")  # each attempt's workspace copy is removed
    assert (manifest.parent / "workspace" / "value.txt").read_text() == "3\n"


def test_an_evicted_measure_is_tried_again_and_past_its_retries_reads_broken(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain)
    # baseline runs; iteration 1 is evicted once then runs; iteration 2 is evicted every time
    domain["kubelet"].script = ["run", "evict", "run", "evict", "evict", "evict"]
    done = cli("run", "--manifest", manifest, "--iterations", "2")
    rows = _rows(manifest)
    assert [(r["iter"], r["decision"]) for r in rows][:2] == [(0, "baseline"), (1, "keep")]
    assert rows[1]["score"] == 2 and rows[1]["valid"]
    last = rows[2]
    assert last["decision"] == "discard" and not last["valid"]
    assert "could not be carried out on kubernetes (3 attempts)" in last["note"]
    assert "Evicted" in last["note"]
    assert sum("trying again" in n for n in _notes(manifest)) == 3
    assert len(_posted_jobs(fake_api)) == 6
    assert done.returncode == 0, done.stdout + done.stderr  # one broken candidate is a discard
    assert (
        manifest.parent / "workspace" / "value.txt"
    ).read_text() == "2\n"  # the unmeasured one rolled back


def test_a_need_nobody_provides_refuses_the_run_before_anything_is_made(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain, deploy="")
    done = cli("run", "--manifest", manifest, "--iterations", "1")
    assert done.returncode == 10
    assert "the judge needs 'gpu', which this run does not provide" in done.stderr
    assert "--cap gpu" in done.stderr and "Traceback" not in done.stderr
    assert not (manifest.parent / "state" / "session.jsonl").exists()
    # a profile that does not serve it, or ships no workspace, is refused the same way
    manifest = _write(domain, extra='workspace = "image"\nimage = "ghcr.io/example/bench:1"')
    done = cli("run", "--manifest", manifest, "--iterations", "1")
    assert done.returncode == 10
    assert "image-baked workspace" in done.stderr
    assert not _posted_jobs(fake_api)


def test_cap_says_this_machine_has_it_and_the_measure_runs_here(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain, needs='needs = ["gpu"]')
    done = cli("run", "--manifest", manifest, "--iterations", "1", "--cap", "gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["note"] for r in _rows(manifest)] == ["value 1 on here, best none", "value 2 on here, best 1"]
    assert not fake_api.calls  # not even a connection: the cluster is not needed


def test_check_measures_through_the_runner_as_a_run_will(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain)
    done = cli("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "the judge needs 'gpu': measured on kubernetes, as a run will" in done.stdout
    assert "value 1 on pod" in done.stdout
    assert len(_posted_jobs(fake_api)) == 1
    here = cli("check", "--manifest", manifest, "--cap", "gpu")
    assert here.returncode == 0 and "value 1 on here" in here.stdout
    assert len(_posted_jobs(fake_api)) == 1


def _start(manifest: Path, domain: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    env = crucible_env(KUBECONFIG=str(domain["dir"] / "kubeconfig"))
    return subprocess.Popen(
        [str(CRUCIBLE), "run", "--manifest", str(manifest), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _await_running_pods(fake_api: FakeApiServer, count: int) -> None:
    for _ in range(600):  # bounded: 60 s
        running = [
            k
            for k in _left(fake_api, "pods")
            if fake_api.objects[k].get("status", {}).get("phase") == "Running"
        ]
        if len(running) >= count:
            return
        time.sleep(0.1)
    pytest.fail("the measure's pod never started")


def test_a_second_sigterm_mid_measure_deletes_its_job(
    fake_api: FakeApiServer, domain: dict[str, Any]
) -> None:
    manifest = _write(domain)
    domain["kubelet"].script = ["run", "hang"]  # the first candidate's measure never ends by itself
    proc = _start(manifest, domain, "--iterations", "2")
    try:
        _await_running_pods(fake_api, 1)
        while len(_posted_jobs(fake_api)) < 2:
            time.sleep(0.1)
        _await_running_pods(fake_api, 1)
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)  # the second one aborts now
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    hung = _posted_jobs(fake_api)[1]["metadata"]["name"]
    assert fake_api.calls_to("DELETE", f"/jobs/{hung}")
    assert (NS, hung) not in {k[1:] for k in _left(fake_api, "jobs")}
    assert not _left(fake_api, "configmaps")
    assert _events(manifest)[-1]["kind"] == "shutdown"


def test_a_killed_engine_resumes_deletes_the_job_it_left_and_measures_again(
    fake_api: FakeApiServer, domain: dict[str, Any]
) -> None:
    manifest = _write(domain)
    domain["kubelet"].script = ["run", "hang"]
    proc = _start(manifest, domain, "--iterations", "1")
    try:
        while len(_posted_jobs(fake_api)) < 2:
            time.sleep(0.1)
        _await_running_pods(fake_api, 1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up: the pod keeps running
        proc.communicate()
    left = _posted_jobs(fake_api)[1]["metadata"]["name"]
    assert any(k[2] == left for k in _left(fake_api, "jobs"))
    resumed = _start(manifest, domain, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, out + err
    assert fake_api.calls_to("DELETE", f"/jobs/{left}")  # reclaimed at start
    assert any("left behind" in n for n in _notes(manifest))
    rows = _rows(manifest)
    assert [(r["iter"], r["score"], r["decision"]) for r in rows] == [(0, 1, "baseline"), (1, 2, "keep")]
    assert len(_posted_jobs(fake_api)) == 3


def test_the_example_gpu_judge_measures_on_the_cluster(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    example = domain["dir"] / "gpu-judge"
    shutil.copytree(EXAMPLE / "gpu-judge", example)
    manifest = example / "crucible.toml"
    done = cli("run", "--manifest", manifest, "--iterations", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["score"], r["decision"]) for r in _rows(manifest)] == [(1, "baseline"), (2, "keep")]
    jobs = _posted_jobs(fake_api)
    assert len(jobs) == 2
    pod = jobs[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["containers"][0]["image"] == "ghcr.io/example/bench:0.1"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert any(n.startswith("task measure | devices:") for n in _notes(manifest))


GRADED = """\
candidate = propose(name = "candidate")
live = apply(name = "live", depends_on = [candidate])
bench = evaluate(name = "bench", run = "sh measure.sh", depends_on = [live], emits = ["score"], needs = "gpu")
score = grade(name = "score", evidence = [bench], score = bench)
decision = decide(name = "d", measurement = score)
workflow(type = "custom", tasks = [candidate, live, bench, score, decision], result = decision)
"""


def test_a_scored_workflows_gpu_task_runs_as_a_job(
    fake_api: FakeApiServer, domain: dict[str, Any], cli
) -> None:
    manifest = _write(domain, needs="")  # the judge measures here; the graph's bench needs the GPU
    (manifest.parent / "workflow.star").write_text(GRADED)
    done = cli("run", "--manifest", manifest, "--iterations", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(manifest)
    assert [(r["iter"], r["score"], r["decision"]) for r in rows] == [
        (0, 1, "baseline"),
        (1, 2, "keep"),
        (2, 3, "keep"),
    ]
    assert [r["note"] for r in rows][1:] == ["graded by bench", "graded by bench"]
    jobs = _posted_jobs(fake_api)
    assert [j["spec"]["template"]["metadata"]["labels"]["crucible.dev/task"] for j in jobs] == [
        "bench",
        "bench",
    ]
    assert any(n.startswith("task bench | measuring value 2 on pod") for n in _notes(manifest))
