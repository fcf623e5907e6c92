"""apply, ps, view, remote control and task Jobs, through the real kubernetes client against a fake API server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crucible_deploy_kubernetes import cluster, jobs
from crucible_deploy_kubernetes.errors import ClusterError
from tests.cli_support import crucible_env, run_crucible
from tests.deploy_kubernetes.conftest import EXAMPLE
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer

NS = "crucible"
POD = "kubernetes-loop"


def _events(*events: dict) -> str:
    return "".join(json.dumps({"v": 1, **e}) + "\n" for e in events)


SESSION = _events(
    {
        "kind": "start",
        "goal": "Raise the integer.",
        "gate": "value",
        "model": "",
        "namespace": "",
        "iters_total": 4,
        "max_cost": 0.0,
        "max_secs": 0,
        "version": "0.1.0",
        "direction": "higher",
        "backend": "command",
        "world": "git",
    },
    {
        "kind": "row",
        "row": {"iter": 0, "decision": "baseline", "note": "", "detail": "", "score": 1, "best": 1},
        "solved": False,
    },
    {
        "kind": "row",
        "row": {"iter": 1, "decision": "kept", "note": "", "detail": "", "score": 2, "best": 2},
        "solved": False,
    },
    {
        "kind": "row",
        "row": {"iter": 2, "decision": "discarded", "note": "", "detail": "", "score": 1, "best": 2},
        "solved": False,
    },
)


def _apply(kubeconfig: Path, *extra: str, run=run_crucible):
    return run(
        "deploy",
        "apply",
        "-m",
        EXAMPLE / "crucible.toml",
        "-p",
        EXAMPLE / "profile.toml",
        "--no-pin",
        "--kubeconfig",
        kubeconfig,
        "--iterations",
        "4",
        "--timeout",
        "20",
        *extra,
    )


def test_apply_then_ps_lists_the_running_pod_with_its_progress(
    fake_api: FakeApiServer, kubeconfig: Path, cli
) -> None:
    fake_api.phase_script[(NS, POD)] = ["Pending", "Running"]
    done = _apply(kubeconfig)
    assert done.returncode == 0, done.stderr
    patches = [c for c in fake_api.calls if c["method"] == "PATCH"]
    assert {c["content_type"] for c in patches} == {"application/apply-patch+yaml"}
    assert {c["query"]["fieldManager"] for c in patches} == {"crucible"}
    assert {c["query"]["force"] for c in patches} == {"true"}
    kinds = [json.loads(c["body"])["kind"] for c in patches]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "RoleBinding", "PersistentVolumeClaim", "Pod"]
    assert "pod crucible/kubernetes-loop: Running" in done.stdout
    assert fake_api.get("rolebindings", "counter-rig", "kubernetes-crucible-edit") is not None

    # Re-applying is idempotent: the same objects, no conflict.
    again = _apply(kubeconfig, "--no-wait", run=cli)
    assert again.returncode == 0, again.stderr

    fake_api.logs[(NS, POD)] = SESSION
    listed = cli("ps", "--kubeconfig", kubeconfig, "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["name"] == POD and row["namespace"] == NS and row["phase"] == "Running"
    assert row["iteration"] == "2/4" and row["best"] == "2" and row["outcome"] is None
    assert any(
        c["query"].get("labelSelector") == "app.kubernetes.io/managed-by=crucible" for c in fake_api.calls
    )
    table = cli("ps", "--kubeconfig", kubeconfig, "--namespace", NS)
    assert table.returncode == 0, table.stderr
    header, line = table.stdout.splitlines()
    assert header.split()[:4] == ["NAME", "NAMESPACE", "MODE", "PHASE"]
    assert line.split()[:4] == [POD, NS, "loop", "Running"] and "2/4" in line


def test_ps_reads_progress_from_annotations_and_skips_other_pods(
    fake_api: FakeApiServer, kubeconfig: Path, cli
) -> None:
    labels = {
        "app.kubernetes.io/managed-by": "crucible",
        "crucible.dev/run": "r",
        "crucible.dev/mode": "loop",
    }
    fake_api.put(
        "pods",
        {
            "metadata": {
                "name": "r-loop",
                "namespace": "a",
                "labels": labels,
                "annotations": {"crucible.dev/iteration": "7", "crucible.dev/best": "0.5"},
            },
            "status": {"phase": "Running"},
        },
    )
    fake_api.put(
        "pods",
        {
            "metadata": {"name": "unrelated", "namespace": "a", "labels": {"app": "x"}},
            "status": {"phase": "Running"},
        },
    )
    listed = cli("ps", "--kubeconfig", kubeconfig, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["iteration"], r["best"]) for r in rows] == [("r-loop", "7", "0.5")]
    assert not fake_api.calls_to("GET", "/log")  # annotations answer: no log read


def test_view_renders_the_session_with_the_console_reporter(
    fake_api: FakeApiServer, kubeconfig: Path, cli
) -> None:
    fake_api.put(
        "pods",
        {
            "metadata": {"name": POD, "namespace": NS, "annotations": {"crucible.dev/iterations": "4"}},
            "status": {"phase": "Pending"},
        },
    )
    fake_api.phase_script[(NS, POD)] = ["Running"]  # view waits for the container first
    ended = SESSION + _events(
        {
            "kind": "summary",
            "rows": [],
            "gate": "value",
            "best_score": 2,
            "baseline_score": 1,
            "kept": 1,
            "discarded": 1,
            "spent": 0,
        },
        {"kind": "shutdown", "outcome": "finished", "reason": "iterations spent"},
    )
    fake_api.logs[(NS, POD)] = "staging\n" + ended + "=== SESSION (rc=0) ===\n" + ended
    done = cli("view", "--pod", POD, "--kubeconfig", kubeconfig)  # namespace from the context
    assert done.returncode == 0, done.stderr
    assert "pod crucible/kubernetes-loop: Running" in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("crucible 0.1.0: value (higher), backend command, world git")
    assert "iter 1/4 kept" in lines[2] and "best 2" in lines[2]
    assert lines[-1] == "run ended: finished (iterations spent)"
    # start, three rows, the summary, its sparkline, the end: the copy after the delimiter is not shown twice
    assert len(lines) == 7
    [log_call] = fake_api.calls_to("GET", "/log")
    assert log_call["query"]["follow"] == "true" and log_call["query"]["container"] == "loop"


def test_remote_steer_and_stop_run_the_control_command_inside_the_pod(
    fake_api: FakeApiServer, kubeconfig: Path, cli
) -> None:
    fake_api.put("pods", {"metadata": {"name": POD, "namespace": NS}, "status": {"phase": "Running"}})
    fake_api.exec_replies[(NS, POD)] = ('{"ok": true, "cmd": "steer", "key": "k-1"}\n', 0)
    done = cli("remote", "steer", "--pod", POD, "--kubeconfig", kubeconfig, "try the cache")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "steer: accepted; key k-1"
    [call] = fake_api.calls_to("GET", "/exec")
    assert call["command"] == [
        "crucible",
        "steer",
        "--state-dir",
        "/var/lib/crucible/run/state",
        "--json",
        "--",
        "try the cache",
    ]
    assert call["query"]["container"] == "loop"

    fake_api.exec_replies[(NS, POD)] = ("crucible: error: no run is reachable\n", 14)
    stopped = cli("remote", "stop", "--pod", POD, "--kubeconfig", kubeconfig, "--reason", "done")
    assert stopped.returncode == 14
    assert "exit 14" in stopped.stderr and "no run is reachable" in stopped.stderr
    assert fake_api.calls_to("GET", "/exec")[-1]["command"][-2:] == ["--reason", "done"]


def test_api_errors_and_an_unreachable_server_are_one_line(
    fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path, cli
) -> None:
    fake_api.fail("PATCH", r"/rolebindings/", 403, 'rolebindings is forbidden: User "tester" cannot patch')
    done = _apply(kubeconfig, "--no-wait", run=cli)
    assert done.returncode == 15
    [line] = done.stderr.strip().splitlines()
    assert "applying RoleBinding crucible/kubernetes-crucible" in line and "403" in line and "RBAC" in line

    missing = cli("view", "--pod", "nope", "--kubeconfig", kubeconfig)
    assert (
        missing.returncode == 15 and "404" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    )

    dead = FakeApiServer()
    dead_config = dead.kubeconfig(tmp_path / "dead-kubeconfig")
    dead.server.server_close()  # the port is now closed: connection refused
    for args in (
        ("ps",),
        ("deploy", "apply", "-m", EXAMPLE / "crucible.toml", "-p", EXAMPLE / "profile.toml", "--no-pin"),
    ):
        out = cli(*args, "--kubeconfig", dead_config)
        assert out.returncode == 15, out.stderr
        [line] = out.stderr.strip().splitlines()
        assert "unreachable" in line and "Traceback" not in out.stderr


def test_a_pod_that_cannot_pull_its_image_fails_apply(fake_api: FakeApiServer, kubeconfig: Path, cli) -> None:
    waiting = {
        "containerStatuses": [
            {
                "name": "loop",
                "image": "x",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff"}},
            }
        ]
    }
    fake_api.phase_script[(NS, POD)] = [waiting]
    done = _apply(kubeconfig, run=cli)
    assert done.returncode == 15
    assert "cannot start: ImagePullBackOff" in done.stderr


def test_help_imports_no_kubernetes_module() -> None:
    code = (
        "import sys\n"
        "from crucible_core.cli.main import main\n"
        "for argv in (['--help'], ['deploy', '--help'], ['ps', '--help'], ['remote', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=crucible_env())
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "Render or apply" in done.stdout


# -- task Jobs (the transport a Kubernetes task runner will use) ----------------------------------


def _spec(name: str) -> jobs.TaskSpec:
    return jobs.TaskSpec(
        name=name, namespace=NS, run="counter", image="ghcr.io/x/bench:1", command=("./bench.sh",)
    )


def _finish_jobs(fake_api: FakeApiServer, outcome: dict, pod_status: dict, log: str) -> None:
    def on_create(plural: str, obj: dict) -> None:
        if plural != "jobs":
            return
        name = obj["metadata"]["name"]
        fake_api.put(
            "pods",
            {
                "metadata": {"name": f"{name}-abcde", "namespace": NS, "labels": {"job-name": name}},
                "status": pod_status,
            },
        )
        fake_api.logs[(NS, f"{name}-abcde")] = log
        fake_api.phase_script[(NS, name)] = [outcome]

    fake_api.on_create = on_create


@pytest.fixture
def job_client(fake_api: FakeApiServer, kubeconfig: Path) -> jobs.JobClient:
    return jobs.JobClient(cluster.connect(kubeconfig))


def test_a_job_task_passes_its_output_through(fake_api: FakeApiServer, job_client: jobs.JobClient) -> None:
    complete = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    _finish_jobs(fake_api, complete, {"phase": "Succeeded"}, '{"valid": true, "score": 3}\n')
    outcome = job_client.run(_spec("bench-1"), timeout=20)
    assert outcome.succeeded and not outcome.transport
    assert outcome.log == '{"valid": true, "score": 3}\n'
    [post] = fake_api.calls_to("POST", "/apis/batch/v1/namespaces/crucible/jobs")
    assert json.loads(post["body"])["spec"]["backoffLimit"] == 0


def test_an_evicted_job_is_a_transport_failure_to_retry(
    fake_api: FakeApiServer, job_client: jobs.JobClient
) -> None:
    failed = {
        "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        "failed": 1,
    }
    _finish_jobs(fake_api, failed, {"phase": "Failed", "reason": "Evicted"}, "")
    outcome = job_client.run(_spec("bench-2"), timeout=20)
    assert not outcome.succeeded and outcome.transport and outcome.reason == "Evicted"

    crashed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    _finish_jobs(fake_api, crashed, {"phase": "Failed"}, "boom\n")
    outcome = job_client.run(_spec("bench-3"), timeout=20)
    assert not outcome.succeeded and not outcome.transport and outcome.log == "boom\n"


def test_cancelling_a_run_deletes_its_jobs(fake_api: FakeApiServer, job_client: jobs.JobClient) -> None:
    job_client.create(_spec("bench-4"))
    job_client.create(_spec("bench-5"))
    with pytest.raises(ClusterError, match="409"):
        job_client.create(_spec("bench-5"))
    assert job_client.delete_run(NS, "counter") == 2
    assert fake_api.get("jobs", NS, "bench-4") is None and fake_api.get("jobs", NS, "bench-5") is None
    deletes = fake_api.calls_to("DELETE", "/jobs/")
    assert len(deletes) == 2
    job_client.delete(NS, "bench-4")  # already gone: fine
