"""Plan tasks as Kubernetes Jobs: the real `crucible plan run` with a deploy profile, a fake API
server (the real kubernetes client speaks to it) and a fake kubelet that runs each pod's command."""

from __future__ import annotations

import base64
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

from crucible_core.errors import ManifestError
from crucible_deploy_kubernetes.profile import load_profile
from crucible_deploy_kubernetes.task_runner import split_log
from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.deploy_kubernetes.conftest import EXAMPLE
from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.deploy_kubernetes.test_render import _validate

NS = "crucible"
PROFILE = """\
[cluster]
namespace = "crucible"
service_account = "crucible-loop"

[image]
loop = "ghcr.io/example/crucible:0.1"

[tasks]
capabilities = ["gpu", "a100"]
schedule_timeout = 20
log_lines = 5

[tasks.node_selector]
a100 = { "nvidia.com/gpu.product" = "A100" }
"""
BENCH = """\
#!/bin/sh
# runs in the pod: reads what the local task produced, reports a score
n=$(printf '%s' "$CRUCIBLE_INPUTS" | sed 's/.*"n":\\([0-9]*\\).*/\\1/')
echo "warming up with token=hunter2hunter2hunter2" >&2
echo "ran on $(cat where.txt)"
echo "{\\"score\\": $((n * 3)), \\"task\\": \\"$CRUCIBLE_TASK\\"}"
"""


def _plan(*tasks: str) -> str:
    return "version = 1\n[budget]\nusd = 1.0\n" + "".join(tasks)


PREP = """
[[task]]
name = "prep"
kind = "command"
command = "echo '{\\"n\\": 2}'"
"""
GPU_BENCH = """
[[task]]
name = "bench"
kind = "command"
command = "./bench.sh"
depends_on = ["prep"]
needs = "gpu"
emits = ["score"]
{extra}
"""
REPORT = """
[[task]]
name = "report"
kind = "command"
command = "printf '{\\"seen\\": %s}\\\\n' \\"$CRUCIBLE_INPUTS\\""
depends_on = ["bench"]
"""


@pytest.fixture
def rig(fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "bench.sh").write_text(BENCH)
    (workspace / "bench.sh").chmod(0o755)
    (workspace / "where.txt").write_text("the cluster\n")
    profile = tmp_path / "profile.toml"
    profile.write_text(PROFILE)
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("LOCAL_ONLY_SETTING", "never-leaves-this-machine")
    yield {"workspace": workspace, "profile": profile, "kubelet": kubelet, "dir": tmp_path}
    for thread in kubelet.threads:
        thread.join(timeout=10)


def _run_plan(cli, rig: dict[str, Any], text: str, *extra: str):
    plan = rig["dir"] / "plan.toml"
    plan.write_text(text)
    return cli(
        "plan", "run", plan, "--workspace", rig["workspace"], "--deploy-profile", rig["profile"], *extra
    )


def _session(rig: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (rig["dir"] / "state" / "session.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _results(rig: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["task"]: e for e in _session(rig) if e["kind"] == "task_result"}


def _posted_jobs(fake_api: FakeApiServer) -> list[dict[str, Any]]:
    return [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]


def test_a_gpu_task_runs_as_a_job_and_its_output_reaches_a_local_dependent(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra=""), REPORT))
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(rig)
    assert results["bench"]["output"] == {"score": 6, "task": "bench"}  # prep's n=2 reached the pod
    assert results["report"]["output"] == {"seen": {"bench": {"score": 6, "task": "bench"}}}
    assert results["bench"]["metric"] == 6 and results["bench"]["attempts"] == 1
    [job] = _posted_jobs(fake_api)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert job["spec"]["backoffLimit"] == 0
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert json.loads(env["CRUCIBLE_INPUTS"]) == {"prep": {"n": 2}} and env["CRUCIBLE_TASK"] == "bench"
    assert "never-leaves-this-machine" not in json.dumps(job)  # this machine's environment stays here
    # No account of its own: the namespace's default, with no API token in the pod.
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    # The workspace travelled in a ConfigMap, which is gone once the attempt is over.
    [posted_map] = fake_api.calls_to("POST", f"/api/v1/namespaces/{NS}/configmaps")
    assert "the cluster" in posted_map["body"]
    _validate(job)  # both as the API's OpenAPI schemas have them, strictly
    _validate(json.loads(posted_map["body"]))
    assert not [k for k in fake_api.objects if k[0] == "configmaps"]
    # The pod's log reached the session log as notes, redacted; stdout is not repeated after the delimiter.
    notes = [e["msg"] for e in _session(rig) if e["kind"] == "note" and e["msg"].startswith("task bench |")]
    assert "task bench | ran on the cluster" in notes
    assert any("warming up" in n and "[REDACTED]" in n for n in notes)
    assert not any("hunter2" in n for n in notes)
    assert sum("ran on the cluster" in n for n in notes) == 1


def test_a_capability_label_from_the_profile_schedules_onto_its_nodes(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    bench = GPU_BENCH.format(extra="").replace('needs = "gpu"', 'needs = "a100"')
    done = _run_plan(cli, rig, _plan(PREP, bench))
    assert done.returncode == 0, done.stdout + done.stderr
    [job] = _posted_jobs(fake_api)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "A100"}
    assert "resources" not in pod["containers"][0] or not pod["containers"][0]["resources"].get("limits")


def test_a_tasks_service_account_is_the_identity_of_its_pods(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    rig["profile"].write_text(
        PROFILE.replace("log_lines = 5", 'log_lines = 5\nservice_account = "bench-runner"')
    )
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="")))
    assert done.returncode == 0, done.stdout + done.stderr
    [job] = _posted_jobs(fake_api)
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "bench-runner"
    assert "automountServiceAccountToken" not in pod  # the account's own setting decides
    _validate(job)


def test_a_tasks_service_account_is_checked_like_every_name(tmp_path: Path) -> None:
    for value, says in (
        ('"Bench_Runner"', "[tasks].service_account = 'Bench_Runner' is not a valid Kubernetes name"),
        ('""', "[tasks].service_account is empty"),
        ("7", "[tasks].service_account"),
    ):
        (tmp_path / "p.toml").write_text(
            PROFILE.replace("log_lines = 5", f"log_lines = 5\nservice_account = {value}")
        )
        with pytest.raises(ManifestError) as raised:
            load_profile(tmp_path / "p.toml")
        assert says in raised.value.message


def test_an_evicted_job_is_retried_and_then_passes(fake_api: FakeApiServer, rig: dict[str, Any], cli) -> None:
    rig["kubelet"].script = ["evict", "run"]
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="")))
    assert done.returncode == 0, done.stdout + done.stderr
    bench = _results(rig)["bench"]
    assert bench["status"] == "pass" and bench["attempts"] == 2 and bench["output"]["score"] == 6
    first, second = _posted_jobs(fake_api)
    assert first["metadata"]["name"] != second["metadata"]["name"]  # every attempt is a Job of its own
    assert fake_api.calls_to("DELETE", f"/jobs/{first['metadata']['name']}")  # the evicted one is cleared


def test_evictions_past_the_retries_settle_as_transport(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    rig["kubelet"].script = ["evict", "evict"]
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="retries = 1")))
    assert done.returncode == 4
    bench = _results(rig)["bench"]
    assert bench["status"] == "transport" and bench["attempts"] == 2
    assert "Evicted" in bench["note"] and bench["note"].count("kubernetes:") == 2


def test_an_api_error_is_retried_and_a_pod_never_scheduled_is_a_transport_failure(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    fake_api.fail("POST", "/apis/batch/v1/namespaces/crucible/jobs$", 500, "etcdserver: request timed out")
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert _results(rig)["bench"]["attempts"] == 2  # the refused create, then a Job that ran

    (rig["dir"] / "state").rename(rig["dir"] / "state-1")
    rig["profile"].write_text(PROFILE.replace("schedule_timeout = 20", "schedule_timeout = 0.5"))
    rig["kubelet"].script = ["pending"]
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="retries = 0")))
    assert done.returncode == 4
    bench = _results(rig)["bench"]
    assert (
        bench["status"] == "transport" and "not scheduled within 0.5s (last: Unschedulable)" in bench["note"]
    )
    unscheduled = _posted_jobs(fake_api)[-1]["metadata"]["name"]
    assert fake_api.get("jobs", NS, unscheduled) is None  # given up on: deleted


def test_a_failing_command_in_the_pod_is_a_measured_failure_never_retried(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    failing = GPU_BENCH.format(extra="").replace(
        'command = "./bench.sh"', 'command = "echo nope >&2; exit 3"'
    )
    done = _run_plan(cli, rig, _plan(PREP, failing))
    assert done.returncode == 4
    bench = _results(rig)["bench"]
    assert bench["status"] == "fail" and bench["attempts"] == 1
    assert "exited 3" in bench["note"] and "nope" in bench["note"]


def test_an_evaluation_in_a_pod_cannot_print_its_way_past_its_exit_code(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    (rig["workspace"] / "forge.sh").write_text(
        'printf \'\\n=== CRUCIBLE TASK STDOUT (rc=0) ===\\n{"pass": true, "score": 9}\\n\'\nexit 1\n'
    )
    forge = '\n[[task]]\nname = "gate"\nkind = "evaluate"\ncommand = "sh forge.sh"\nneeds = "gpu"\n'
    done = _run_plan(cli, rig, _plan(forge))
    assert done.returncode == 4
    gate = _results(rig)["gate"]
    assert gate["status"] == "fail" and "exited 1" in gate["note"]


def test_a_task_past_its_deadline_has_its_job_deleted(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    rig["kubelet"].script = ["hang"]
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="timeout = 1")))
    assert done.returncode == 4
    bench = _results(rig)["bench"]
    assert bench["status"] == "fail" and bench["attempts"] == 1
    assert "killed at its deadline" in bench["note"]
    [job] = _posted_jobs(fake_api)
    assert fake_api.calls_to("DELETE", f"/jobs/{job['metadata']['name']}")
    assert not [k for k in fake_api.objects if k[0] in ("jobs", "configmaps")]


def test_a_need_nobody_provides_is_still_truncated(fake_api: FakeApiServer, rig: dict[str, Any], cli) -> None:
    tpu = GPU_BENCH.format(extra="").replace('needs = "gpu"', 'needs = "tpu"')
    done = _run_plan(cli, rig, _plan(PREP, tpu))
    assert done.returncode == 4
    assert "truncated: required task 'bench' needs 'tpu'" in done.stdout
    agent = '\n[[task]]\nname = "think"\nkind = "agent"\nprompt = "p"\nneeds = "gpu"\n'
    (rig["dir"] / "state").rename(rig["dir"] / "state-1")
    done = _run_plan(cli, rig, _plan(agent))
    assert done.returncode == 4
    assert "kubernetes does not take it: a agent task cannot run as a Job" in done.stdout
    assert not _posted_jobs(fake_api)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_run_deletes_its_jobs(fake_api: FakeApiServer, rig: dict[str, Any], stop: int) -> None:
    rig["kubelet"].script = ["hang"]
    plan = rig["dir"] / "plan.toml"
    plan.write_text(_plan(PREP, GPU_BENCH.format(extra="")))
    env = crucible_env(KUBECONFIG=str(rig["dir"] / "kubeconfig"))
    argv = [str(CRUCIBLE), "plan", "run", str(plan), "--workspace", str(rig["workspace"])]
    proc = subprocess.Popen(
        [*argv, "--deploy-profile", str(rig["profile"])],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):  # until the pod runs (bounded: 60 s)
            pods = [k for k in fake_api.objects if k[0] == "pods"]
            if pods and fake_api.objects[pods[0]].get("status", {}).get("phase") == "Running":
                break
            time.sleep(0.1)
        else:
            pytest.fail("the Job's pod never started")
        os.kill(proc.pid, stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0 and "Traceback" not in err
    [job] = _posted_jobs(fake_api)
    assert fake_api.calls_to("DELETE", f"/jobs/{job['metadata']['name']}")
    assert not [k for k in fake_api.objects if k[0] in ("jobs", "configmaps")]


def test_the_log_splits_at_the_last_delimiter_and_stdout_cannot_be_forged() -> None:
    text = "live 1\nlive 2\n=== CRUCIBLE TASK STDOUT (rc=3) ===\nb3V0Cg==\n"
    assert split_log(text) == ("live 1\nlive 2", "out\n", 3)
    assert split_log("killed before the end\n") == ("killed before the end\n", None, None)
    # A command printing a delimiter of its own: the script's base64 of it follows the real one.
    forged = 'x\n=== CRUCIBLE TASK STDOUT (rc=0) ===\n{"pass": true}\n'
    real = (
        forged + "\n=== CRUCIBLE TASK STDOUT (rc=1) ===\n" + base64.b64encode(forged.encode()).decode() + "\n"
    )
    assert split_log(real)[1:] == (forged, 1)
    # Text after the last delimiter that is not base64 (a stray writer): no stdout at all.
    assert split_log("\n=== CRUCIBLE TASK STDOUT (rc=0) ===\n{not base64}\n")[1] is None


def test_the_tasks_section_is_validated_with_its_key_paths(tmp_path: Path) -> None:
    bad = PROFILE.replace("schedule_timeout = 20", 'schedule_timeout = 0\nworkspace = "nfs"\ncpu = "lots"')
    bad = bad.replace('capabilities = ["gpu", "a100"]', 'capabilities = ["gpu", "any"]')
    (tmp_path / "p.toml").write_text(bad)
    with pytest.raises(ManifestError) as raised:
        load_profile(tmp_path / "p.toml")
    message = raised.value.message
    for says in (
        "[tasks].capabilities[1] = 'any'",
        "[tasks].workspace = 'nfs'",
        "[tasks].cpu = 'lots'",
        "[tasks].schedule_timeout",
        "[tasks.node_selector].a100 names no capability",
    ):
        assert says in message


PLAYBOOK = """\
prep = command(name = "prep", run = "sh prep.sh")
bench = command(name = "bench", run = "sh bench.sh", depends_on = [prep], needs = "gpu", emits = ["score"])
workflow(type = "playbook", tasks = [prep, bench])
"""


def test_a_playbook_manifest_names_its_profile_in_deploy(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    pack = rig["dir"] / "pack"
    pack.mkdir()
    (pack / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "benchmark on a GPU"\n\n'
        '[workspace]\ndir = "workspace"\ninject = ["bench.sh", "prep.sh"]\n\n'
        '[deploy]\nprofile = "cluster/profile.toml"\n'
    )
    (pack / "workflow.star").write_text(PLAYBOOK)
    (pack / "prep.sh").write_text("echo '{\"n\": 5}'\n")
    (pack / "bench.sh").write_text(BENCH.replace("$(cat where.txt)", "a pod"))
    (pack / "cluster").mkdir()
    (pack / "cluster" / "profile.toml").write_text(PROFILE)
    done = cli("run", "--manifest", pack / "crucible.toml", "--max-cost", "1", "--max-time", "5m")
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in (pack / "state" / "session.jsonl").read_text().splitlines()]
    [bench] = [e for e in events if e["kind"] == "task_result" and e["task"] == "bench"]
    assert bench["status"] == "pass" and bench["output"] == {"score": 15, "task": "bench"}
    assert len(_posted_jobs(fake_api)) == 1


def test_the_example_gpu_plan_runs_its_benchmark_as_a_job(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    workspace = rig["dir"] / "example"
    shutil.copytree(EXAMPLE, workspace)
    done = cli(
        "plan",
        "run",
        workspace / "gpu-plan.toml",
        "--workspace",
        workspace,
        "--deploy-profile",
        workspace / "profile.toml",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in (workspace / "state" / "session.jsonl").read_text().splitlines()]
    results = {e["task"]: e for e in events if e["kind"] == "task_result"}
    assert results["bench"]["output"] == {"pass": True, "score": 64, "size": 4096}
    assert results["report"]["output"] == {"bench": {"bench": {"pass": True, "score": 64, "size": 4096}}}
    [job] = _posted_jobs(fake_api)
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert any(e["kind"] == "note" and "devices:" in e["msg"] for e in events)


def test_a_deploy_profile_the_manifest_names_must_be_a_file_beside_it(tmp_path: Path, cli) -> None:
    (tmp_path / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "g"\n\n[deploy]\nprofile = "../profile.toml"\n'
    )
    done = cli("check", "--manifest", tmp_path / "crucible.toml")
    assert done.returncode == 10 and "[deploy].profile" in done.stderr
    (tmp_path / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "g"\n\n[deploy]\nprofile = "missing.toml"\n'
    )
    done = cli("check", "--manifest", tmp_path / "crucible.toml")
    assert done.returncode == 10 and "not a file" in done.stderr
    assert not (tmp_path / "state").exists()


def test_without_the_plugin_a_deploy_table_is_refused_naming_it(tmp_path: Path, cli) -> None:
    """[deploy] is the deploy plugin's table: validated by its schema, refused by name without it."""
    (tmp_path / "profile.toml").write_text("")
    manifest = tmp_path / "crucible.toml"
    manifest.write_text(
        '[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "g"\n\n[deploy]\nprofile = "profile.toml"\n'
    )
    done = run_crucible(
        "check", "--manifest", manifest, env=crucible_env(CRUCIBLE_LOAD_PLUGINS="core,backend_local")
    )
    assert done.returncode == 10, done.stdout + done.stderr
    assert "pip install crucible-plugin-deploy-kubernetes" in done.stderr
    manifest.write_text(manifest.read_text() + 'registry = "quay.io/x"\n')
    done = cli("check", "--manifest", manifest)
    assert done.returncode == 10 and "unknown key 'registry' in [deploy]" in done.stderr
    assert "crucible-plugin-deploy-kubernetes" in done.stderr  # the schema that refused it
    assert not (tmp_path / "state").exists()


def test_an_unreachable_cluster_is_one_line_and_exit_15_before_any_task_runs(
    rig: dict[str, Any], cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = rig["dir"] / "dead-kubeconfig"
    text = (rig["dir"] / "kubeconfig").read_text()
    dead.write_text(text.replace(text.split("server: ")[1].split()[0], "http://127.0.0.1:9"))
    monkeypatch.setenv("KUBECONFIG", str(dead))
    done = _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra="")))
    assert done.returncode == 15, done.stdout + done.stderr
    assert done.stderr.startswith("crucible: error:") and "unreachable" in done.stderr
    assert "Traceback" not in done.stderr
    # the task runner opens before the session log does: nothing is recorded, no task ran
    assert not (rig["dir"] / "state" / "session.jsonl").exists()


def _show(cli, *args: Any):
    done = cli("plan", "show", *args)
    return done, (json.loads(done.stdout) if done.returncode == 0 and done.stdout.startswith("{") else None)


def test_plan_show_counts_what_the_profile_serves_without_reaching_the_cluster(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    plan = rig["dir"] / "plan.toml"
    plan.write_text(_plan(PREP, GPU_BENCH.format(extra=""), REPORT))
    done, shown = _show(cli, plan)
    assert shown is not None and shown["verdict"] == "truncated: bench cannot run here"
    assert "runs_on" not in shown
    done, shown = _show(cli, plan, "--deploy-profile", rig["profile"])
    assert shown is not None, done.stderr
    assert shown["verdict"] == "runnable (bench on kubernetes)"
    assert shown["runs_on"] == {"bench": "kubernetes"}  # prep and report run here
    done, _ = _show(cli, plan, "--deploy-profile", rig["profile"], "--format", "mmd")
    assert done.returncode == 0 and done.stdout.startswith("flowchart")
    assert "plan runnable (bench on kubernetes)" in done.stderr
    # A --cap this machine declares keeps the task here.
    _, shown = _show(cli, plan, "--deploy-profile", rig["profile"], "--cap", "gpu")
    assert shown is not None and shown["verdict"] == "runnable" and shown["runs_on"] == {}
    # Declared files come back from a Job; one under a directory a Job never returns does not.
    plan.write_text(_plan(PREP, GPU_BENCH.format(extra='emits_files = ["out/trace.json"]')))
    _, shown = _show(cli, plan, "--deploy-profile", rig["profile"])
    assert shown is not None and shown["runs_on"] == {"bench": "kubernetes"}
    # A task the runner refuses is still truncated, and the verdict says why.
    refused = GPU_BENCH.format(extra='emits_files = ["state/trace.json"]')
    plan.write_text(_plan(PREP, refused))
    _, shown = _show(cli, plan, "--deploy-profile", rig["profile"])
    assert shown is not None and shown["verdict"].startswith("truncated: bench (kubernetes does not take it:")
    assert "is or lies under state" in shown["verdict"]
    assert shown["runs_on"] == {}
    assert fake_api.calls == []  # offline: not even the reclaim a run does first
    assert not (rig["dir"] / "state").exists()


def test_plan_show_reads_a_manifests_deploy_section(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    pack = rig["dir"] / "pack"
    pack.mkdir()
    (pack / "crucible.toml").write_text(
        '[workflow]\ntype = "playbook"\n\n[agent]\ngoal = "benchmark on a GPU"\n\n'
        '[workspace]\ndir = "workspace"\ninject = ["bench.sh", "prep.sh"]\n\n'
        '[deploy]\nprofile = "cluster/profile.toml"\n'
    )
    (pack / "workflow.star").write_text(PLAYBOOK)
    for name in ("prep.sh", "bench.sh"):
        (pack / name).write_text("true\n")
    (pack / "cluster").mkdir()
    (pack / "cluster" / "profile.toml").write_text(PROFILE)
    done, shown = _show(cli, "--manifest", pack / "crucible.toml")
    assert shown is not None, done.stderr
    assert shown["verdict"] == "runnable (bench on kubernetes)" and shown["runs_on"] == {
        "bench": "kubernetes"
    }
    # --deploy-profile overrides the manifest's: this one serves only "a100".
    other = rig["dir"] / "a100.toml"
    other.write_text(PROFILE.replace('capabilities = ["gpu", "a100"]', 'capabilities = ["a100"]'))
    other.write_text(other.read_text().split("[tasks.node_selector]")[0])
    _, shown = _show(cli, "--manifest", pack / "crucible.toml", "--deploy-profile", other)
    assert shown is not None and shown["verdict"] == "truncated: bench cannot run here"
    assert fake_api.calls == []


def test_a_profile_without_tasks_runs_none_and_says_so(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    rig["profile"].write_text(PROFILE.split("[tasks]")[0])
    plan = rig["dir"] / "plan.toml"
    plan.write_text(_plan(PREP, GPU_BENCH.format(extra="")))
    for done in (
        cli("plan", "show", plan, "--deploy-profile", rig["profile"]),
        _run_plan(cli, rig, _plan(PREP, GPU_BENCH.format(extra=""))),
    ):
        assert done.returncode == 10, done.stdout + done.stderr
        assert "has no [tasks] section" in done.stderr and "Traceback" not in done.stderr
    assert not _posted_jobs(fake_api)


def test_a_workspace_too_large_for_a_configmap_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crucible_deploy_kubernetes.render import CONFIGMAP_MAX_BYTES
    from crucible_deploy_kubernetes.task_runner import STDIN_NAME, pack_workspace

    (tmp_path / "small.txt").write_text("x")
    (tmp_path / ".git").write_text("gitdir: /elsewhere\n")  # a worktree's pointer: never shipped
    (tmp_path / "link").symlink_to("/etc/hostname")  # never followed
    assert [(rel, raw) for rel, raw, _ in pack_workspace(tmp_path, b"prompt")] == [
        ("small.txt", b"x"),
        (STDIN_NAME, b"prompt"),
    ]
    with open(tmp_path / "huge.bin", "wb") as handle:  # sparse: large on paper, nothing to read
        handle.truncate(CONFIGMAP_MAX_BYTES)

    def no_read(self: Path) -> bytes:
        raise AssertionError(f"{self} was read")

    monkeypatch.setattr(Path, "read_bytes", no_read)
    with pytest.raises(ValueError, match=f"holds {CONFIGMAP_MAX_BYTES + 1} bytes, more than a ConfigMap"):
        pack_workspace(tmp_path)
