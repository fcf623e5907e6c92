"""A plain-HTTP service: ready on any HTTP answer, and one served at a time when the catalog says so."""

from __future__ import annotations

import sys
from pathlib import Path

from crucible_core.services.catalog import file_sha256
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible

TASK = """
[[task]]
name = "{name}"
kind = "command"
needs = "service.files"
command = '''set -C; : > ../busy && curl -sf -H "Authorization: Bearer $CRUCIBLE_SERVICE_FILES_TOKEN" "$CRUCIBLE_SERVICE_FILES_URL/" > /dev/null; sleep 0.3; rm ../busy; echo '{{}}' '''
"""


def test_a_one_client_http_service_never_serves_two_tasks_at_once(tmp_path: Path) -> None:
    tool = tmp_path / "files-service"
    tool.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m http.server "$CRUCIBLE_SERVICE_PORT" --bind 127.0.0.1\n'
    )
    tool.chmod(0o755)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        f'[[tool]]\nname = "files"\nexecutable = "{tool}"\nsha256 = "{file_sha256(tool)}"\nversion = "1.0.0"\n'
        'transport = "http"\ncreates_external_resources = false\nconcurrent_clients = false\n'
    )
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1.0\n[[service]]\nname = "files"\ntool = "files"\n'
        + "".join(TASK.format(name=f"t{i}") for i in range(3))
    )
    (tmp_path / "ws").mkdir()
    env = crucible_env(CRUCIBLE_SERVICE_CATALOG=str(catalog))
    done = run_crucible(
        "plan", "run", plan, "--jobs", "3", "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env
    )
    # Overlapping tasks would collide on ../busy (noclobber) and fail.
    assert done.returncode == 0, done.stdout + done.stderr
    events = list(read_events(tmp_path / "state" / "session.jsonl"))
    assert [e["kind"] for e in events if e["kind"].startswith("service_")] == [
        "service_start",
        "service_ready",
        "service_exit",
    ]
