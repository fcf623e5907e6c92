"""A task Job's declared files: brought back into the task's workdir, captured and staged as a local task's.

The real `crucible plan run` with a deploy profile, the fake API server and the fake kubelet
(which runs each pod's script for real). The same plans run with `--cap gpu` show what a local
run does, and the Job's run must match it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy_kubernetes.fake_apiserver import FakeApiServer
from tests.deploy_kubernetes.fake_kubelet import FakeKubelet
from tests.deploy_kubernetes.test_task_jobs import PROFILE

NS = "crucible"
# bench.sh runs where the GPU is: writes the declared trace (how is up to $MODE), reports a score.
BENCH = """\
#!/bin/sh
mkdir -p out
case "${MODE:-write}" in
  write) echo "trace from $(cat where.txt)" > out/trace.txt ;;
  link) ln -sf "$OUTSIDE" out/trace.txt ;;
  none) rm -f out/trace.txt ;;
esac
echo '{"score": 7}'
"""
# report.sh runs here and reads what bench declared, staged for it.
REPORT = """\
#!/bin/sh
trace=$(cat "$CRUCIBLE_INPUT_FILES/bench/out/trace.txt")
printf '{"trace": "%s"}\\n' "$trace"
"""
PLAN = """\
version = 1
[budget]
usd = 1.0

[[task]]
name = "bench"
kind = "command"
command = "MODE={mode} OUTSIDE={outside} ./bench.sh"
needs = "gpu"
emits_files = ["out/trace.txt"]

[[task]]
name = "report"
kind = "command"
command = "./report.sh"
depends_on = ["bench"]
"""
# A hostile image's tar: whatever it is asked, it prints an archive climbing out of the workdir.
HOSTILE_TAR = f"""\
#!{sys.executable}
import io, sys, tarfile
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w") as tar:
    for name in ("../escape.txt", "out/trace.txt"):
        info = tarfile.TarInfo(name)
        info.size = 6
        tar.addfile(info, io.BytesIO(b"owned\\n"))
sys.stdout.buffer.write(raw.getvalue())
"""


@pytest.fixture
def rig(fake_api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    (tmp_path / "profile.toml").write_text(PROFILE)
    kubelet = FakeKubelet(fake_api, tmp_path / "node")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    yield {"dir": tmp_path, "kubelet": kubelet}
    for thread in kubelet.threads:
        thread.join(timeout=10)


def _run(
    cli, rig: dict[str, Any], name: str, mode: str, *extra: str, stale: bool = False
) -> tuple[Any, dict[str, Any], Path]:
    """Run the plan in a fresh directory of its own: (the CLI's result, task results by name, its dir)."""
    base = rig["dir"] / name
    workspace = base / "ws"
    workspace.mkdir(parents=True)
    for script, text in (("bench.sh", BENCH), ("report.sh", REPORT)):
        (workspace / script).write_text(text)
        (workspace / script).chmod(0o755)
    (workspace / "where.txt").write_text("the cluster\n" if "--cap" not in extra else "this machine\n")
    if stale:  # an earlier run's trace, in the workspace before this one starts
        (workspace / "out").mkdir()
        (workspace / "out" / "trace.txt").write_text("stale\n")
    outside = base / "outside.txt"
    outside.write_text("this machine's own file\n")
    plan = base / "plan.toml"
    plan.write_text(PLAN.format(mode=mode, outside=outside))
    done = cli("plan", "run", plan, "--workspace", workspace, *extra)
    events = [json.loads(line) for line in (base / "state" / "session.jsonl").read_text().splitlines()]
    results = {e["task"]: e for e in events if e["kind"] == "task_result"}
    return done, results, base


def _remote(cli, rig: dict[str, Any], name: str, mode: str, *, stale: bool = False):
    return _run(cli, rig, name, mode, "--deploy-profile", rig["dir"] / "profile.toml", stale=stale)


def test_a_gpu_tasks_declared_file_comes_back_and_a_local_dependent_reads_it(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    done, results, base = _remote(cli, rig, "remote", "write")
    assert done.returncode == 0, done.stdout + done.stderr
    assert results["bench"]["status"] == "pass" and results["bench"]["metric"] == 7
    # The trace was written in the pod (where.txt says so), staged for report here, read by it.
    assert results["report"]["output"] == {"trace": "trace from the cluster"}
    assert (
        base / "state" / "files" / "bench" / "out" / "trace.txt"
    ).read_text() == "trace from the cluster\n"
    assert (base / "ws" / "out" / "trace.txt").read_text() == "trace from the cluster\n"
    [job] = [json.loads(c["body"]) for c in fake_api.calls_to("POST", f"/apis/batch/v1/namespaces/{NS}/jobs")]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][4:] == ["out/trace.txt"]


def test_a_declared_file_missing_in_the_pod_is_missing_here_as_it_is_locally(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    # The command removes the trace an earlier run left: locally it is then gone, and the pod's
    # removal of its copy removes it here too, so neither run captures the stale one.
    local, local_results, local_base = _run(cli, rig, "local", "none", "--cap", "gpu", stale=True)
    remote, results, base = _remote(cli, rig, "remote", "none", stale=True)
    assert not (local_base / "ws" / "out" / "trace.txt").exists()
    assert not (base / "ws" / "out" / "trace.txt").exists()
    assert remote.returncode == local.returncode != 0
    for task in ("bench", "report"):
        assert results[task]["status"] == local_results[task]["status"], results[task]
        assert results[task]["note"] == local_results[task]["note"]
    assert results["bench"]["status"] == "fail" and "out/trace.txt: absent" in results["bench"]["note"]
    assert not (base / "state" / "files" / "bench").exists()


def test_a_declared_file_that_is_a_link_in_the_pod_is_refused_and_nothing_is_written(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    done, results, base = _remote(cli, rig, "link", "link")
    assert done.returncode != 0
    bench = results["bench"]
    assert bench["status"] == "fail" and "a link: only plain files come back" in bench["note"]
    assert results["report"]["status"] != "pass"
    assert (
        not (base / "ws" / "out" / "trace.txt").exists()
        and not (base / "ws" / "out" / "trace.txt").is_symlink()
    )
    assert (base / "outside.txt").read_text() == "this machine's own file\n"
    assert not (base / "state" / "files" / "bench").exists()


def test_an_archive_climbing_out_of_the_workdir_is_refused_whole(
    fake_api: FakeApiServer, rig: dict[str, Any], cli
) -> None:
    bin_dir = rig["dir"] / "hostile-bin"
    bin_dir.mkdir()
    (bin_dir / "tar").write_text(HOSTILE_TAR)
    (bin_dir / "tar").chmod(0o755)
    rig["kubelet"].path_prefix = bin_dir
    done, results, base = _remote(cli, rig, "climb", "write")
    assert done.returncode != 0
    bench = results["bench"]
    assert bench["status"] == "fail" and "climbs out of the workspace" in bench["note"]
    # Refused whole: neither the climbing member nor the declared one was written.
    assert not (base / "escape.txt").exists() and not (base / "ws" / "escape.txt").exists()
    assert not (base / "ws" / "out" / "trace.txt").exists()
    assert not (base / "state" / "files" / "bench").exists()
