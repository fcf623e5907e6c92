"""examples/service-cluster runs as its README says, against the scripted Oubliette."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from crucible_core.session_log import read_events
from tests.cli_support import EXAMPLES, run_crucible
from tests.services.support import crucible_env, serve_scripted, stop


def test_the_service_cluster_example(tmp_path: Path) -> None:
    example = tmp_path / "service-cluster"
    shutil.copytree(EXAMPLES / "service-cluster", example)
    port, server = serve_scripted(example / "oubliette", "demo-token")
    plan = example / "plan.toml"
    plan.write_text(plan.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    try:
        made = run_crucible("services", "catalog", "--output", example / "catalog.toml", cwd=example)
        assert made.returncode == 0, made.stderr
        env = crucible_env(
            CRUCIBLE_SERVICE_CATALOG=str(example / "catalog.toml"),
            OUBLIETTE_MCP_TOKEN="demo-token",
            CRUCIBLE_SERVICE_SECRETS="OUBLIETTE_MCP_TOKEN",
        )
        checked = run_crucible("check", "--plan", plan, cwd=example, env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "needed by deploy" in checked.stdout
        (example / "workspace").mkdir()
        done = run_crucible(
            "plan", "run", plan, "--state-dir", example / "state", cwd=example / "workspace", env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        results = {
            e["task"]: e
            for e in read_events(example / "state" / "session.jsonl")
            if e["kind"] == "task_result"
        }
        assert results["lint"]["output"] == {"saw_cluster": False}
        assert results["deploy"]["output"]["server"].startswith("https://vc-crucible-")
        assert json.loads((example / "oubliette" / "inventory.json").read_text()) == {}

        # The same graph as a playbook manifest, in a fresh state and workspace.
        manifest = example / "crucible.toml"
        manifest.write_text(manifest.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
        shutil.rmtree(example / "state")
        shutil.rmtree(example / "workspace")
        played = run_crucible(
            "run", "--manifest", manifest, "--max-cost", "0.1", "--max-time", "5m", cwd=example, env=env
        )
        assert played.returncode == 0, played.stdout + played.stderr
        results = {
            e["task"]: e
            for e in read_events(example / "state" / "session.jsonl")
            if e["kind"] == "task_result"
        }
        assert results["lint"]["output"] == {"saw_cluster": False}
        assert results["deploy"]["output"]["server"].startswith("https://vc-crucible-")
        assert json.loads((example / "oubliette" / "inventory.json").read_text()) == {}
    finally:
        stop(server)
