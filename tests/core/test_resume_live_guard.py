"""--resume refuses a state directory whose run is still alive, and ignores a dead run's leftovers."""

from __future__ import annotations

import json
import subprocess
import time

from tests.cli_support import CRUCIBLE, crucible_env, run_crucible
from tests.e2e.session import events, rows


def test_resume_refuses_a_live_run_and_proceeds_after_it_dies(example) -> None:
    manifest = example("counter")
    slow = manifest.read_text().replace('agent_cmd = "./bump.sh"', 'agent_cmd = "sleep 30; ./bump.sh"')
    manifest.write_text(slow)
    live = subprocess.Popen(
        [str(CRUCIBLE), "--manifest", str(manifest), "--iterations", "2", "--ui", "headless"],
        env=crucible_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        control = manifest.parent / "state" / "control.json"
        deadline = time.monotonic() + 30
        while not control.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert control.exists()
        refused = run_crucible("run", "--manifest", manifest, "--resume")
        assert refused.returncode == 11, refused.stderr
        assert "still running" in refused.stderr and str(live.pid) in refused.stderr
    finally:
        live.kill()
        live.wait()
    assert json.loads(control.read_text())["pid"] == live.pid  # a SIGKILL leaves it behind
    manifest.write_text(slow.replace("sleep 30; ", ""))
    resumed = run_crucible("run", "--manifest", manifest, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["iter"] for r in rows(manifest)][-2:] == [1, 2]
    assert events(manifest)[-1]["outcome"] == "finished"
