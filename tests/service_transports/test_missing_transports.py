"""Without crucible-plugin-service-transports a declared service cannot be served: check and run
name the distribution to install, and a run that declares no service is untouched."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import run_crucible
from tests.services.support import env_for, service_table, write_catalog

DEPLOY = """
[[task]]
name = "deploy"
kind = "command"
needs = "service.cluster"
command = "echo '{}'"
"""
# Every plugin but the transports' (crucible-core itself always loads).
WITHOUT_TRANSPORTS = "service_oubliette,world_git,judge_command,lane_plan"


def test_a_service_whose_transport_no_plugin_serves_is_refused_naming_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text("version = 1\n[budget]\nusd = 1.0\n" + service_table("http://127.0.0.1:9/mcp") + DEPLOY)
    env = env_for(tmp_path, write_catalog(tmp_path), CRUCIBLE_LOAD_PLUGINS=WITHOUT_TRANSPORTS)
    checked = run_crucible("check", "--plan", plan, cwd=tmp_path, env=env)
    assert checked.returncode == 13, checked.stdout + checked.stderr
    assert (
        "FAIL service cluster: tool 'oubliette-cluster' speaks transport 'mcp-http', which no installed "
        "plugin serves (pip install crucible-plugin-service-transports)"
    ) in checked.stdout
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 12, done.stdout + done.stderr
    assert "pip install crucible-plugin-service-transports" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state" / "session.jsonl").exists()  # refused before the log opened

    # The same plan with the plugin installed passes its check.
    served = run_crucible(
        "check", "--plan", plan, cwd=tmp_path, env=env_for(tmp_path, write_catalog(tmp_path))
    )
    assert served.returncode == 0 and "speaks transport" not in served.stdout, served.stdout


def test_a_run_without_services_needs_no_transport_plugin(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'version = 1\n[budget]\nusd = 1.0\n[[task]]\nname = "a"\nkind = "command"\ncommand = "echo \'{}\'"\n'
    )
    env = env_for(tmp_path, None, CRUCIBLE_LOAD_PLUGINS=WITHOUT_TRANSPORTS)
    done = run_crucible("plan", "run", plan, "--state-dir", tmp_path / "state", cwd=tmp_path / "ws", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
