"""The loop pod's container script, run for real: a killed pod restarts into `--resume` and finishes the run.

The script is what the rendered pod executes; here it runs under /bin/sh with the real
`crucible` on PATH and a temporary directory standing in for the state volume.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from crucible_deploy_kubernetes.render import LOOP_SCRIPT
from tests.cli_support import crucible_env
from tests.deploy_kubernetes.conftest import EXAMPLE

# The proposer holds its third turn until released, so the test can kill the "pod" mid-run.
HOLDING_BUMP = """#!/bin/sh
set -eu
v=$(cat value.txt)
if [ "$v" -ge 2 ] && [ ! -e "$RELEASE_FILE" ]; then sleep 20; fi
echo $((v + 1)) > value.txt
"""


def _launch(source: Path, run_dir: Path, release: Path) -> subprocess.Popen[str]:
    env = crucible_env(
        CRUCIBLE_SOURCE_DIR=str(source),
        CRUCIBLE_RUN_DIR=str(run_dir),
        CRUCIBLE_MANIFEST_FILE="crucible.toml",
        RELEASE_FILE=str(release),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    return subprocess.Popen(
        ["/bin/sh", "-c", LOOP_SCRIPT, "crucible-pod", "--iterations", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _events(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("=== SESSION (rc="):
            break
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_a_killed_loop_pod_resumes_and_a_finished_one_stays_finished(tmp_path: Path) -> None:
    source = tmp_path / "image-domain"
    shutil.copytree(EXAMPLE, source)
    (source / "bump.sh").write_text(HOLDING_BUMP)
    run_dir, release = tmp_path / "volume" / "run", tmp_path / "release"
    session = run_dir / "state" / "session.jsonl"

    first = _launch(source, run_dir, release)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = session.read_text() if session.exists() else ""
            if any(e.get("kind") == "row" and e["row"].get("iter") == 2 for e in _events(text)):
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.1)
        else:
            raise AssertionError("the first launch never reached iteration 2")
        time.sleep(0.3)  # into the held third turn
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the node dies under the pod
        first.communicate()

    release.touch()
    second = _launch(source, run_dir, release)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    shown = _events(out)
    starts = [e for e in shown if e["kind"] == "start"]
    assert [s.get("resumed") for s in starts] == [False, True], (
        out + err
    )  # the replayed log, then the resumed run
    rows = [e["row"]["iter"] for e in shown if e["kind"] == "row"]
    assert rows[:3] == [0, 1, 2] and rows[-1] == 3
    assert shown[-1]["kind"] == "shutdown"
    assert "=== SESSION (rc=0) ===" in out
    assert out.split("=== SESSION (rc=0) ===\n", 1)[1] == session.read_text()
    assert (run_dir / "workspace" / "value.txt").read_text().strip() == "3"

    # The kubelet may restart a finished pod: it republishes the session and changes nothing.
    before = session.read_text()
    third = _launch(source, run_dir, release)
    out, err = third.communicate(timeout=60)
    assert third.returncode == 0, err
    assert [e["row"]["iter"] for e in _events(out) if e["kind"] == "row"] == rows
    assert session.read_text() == before


def test_a_failed_run_is_a_failed_pod_and_a_restart_does_not_run_it_again(tmp_path: Path) -> None:
    source = tmp_path / "image-domain"
    shutil.copytree(EXAMPLE, source)
    # a measure that never reads valid: the baseline fails, the run fails (exit 4)
    (source / "measure.sh").write_text("#!/bin/sh\necho '{\"valid\": false}'\n")
    run_dir, release = tmp_path / "volume" / "run", tmp_path / "release"
    first = _launch(source, run_dir, release)
    out, err = first.communicate(timeout=120)
    assert first.returncode not in (0, 2, 3) and first.returncode < 128, out + err  # not "Completed"
    session = (run_dir / "state" / "session.jsonl").read_text()
    # the kubelet restarts a failed container: the failure stands, nothing is resumed or rerun
    again = _launch(source, run_dir, release)
    out, err = again.communicate(timeout=60)
    assert again.returncode == first.returncode
    assert "the run failed earlier" in err
    assert (run_dir / "state" / "session.jsonl").read_text() == session
