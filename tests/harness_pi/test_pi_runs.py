"""Whole `crucible run`s with harness = "pi": the real Pi CLI against the scripted endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import run_crucible
from tests.fakes.anthropic_api import call
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_endpoint.scenarios import counter_kept_without_a_leak, crucible_run, engine_env
from tests.harness_endpoint.support import (
    endpoint_env,
    write_domain,
)

pytestmark = pytest.mark.pi_cli


def test_the_counter_keeps_a_pi_edit_with_its_events_and_cost_and_leaks_no_secret(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    counter_kept_without_a_leak(
        "pi", pi_cli, fake, tmp_path, call("bash", command='echo "token is $CANARY_TOKEN"')
    )


def test_flipping_the_harness_is_configuration_only(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    from tests.harness_endpoint.support import cli_path

    opencode_cli = cli_path("opencode")
    manifest = write_domain(tmp_path / "domain", "opencode", endpoint_env(fake))
    env = engine_env(CRUCIBLE_PI_BIN=str(pi_cli), CRUCIBLE_OPENCODE_BIN=str(opencode_cli or "/missing"))
    for harness in ("opencode", "pi"):
        text = manifest.read_text()
        manifest.write_text(text.replace('harness = "opencode"', f'harness = "{harness}"'))
        check = run_crucible("check", "--manifest", manifest, env=env)
        if harness == "opencode" and opencode_cli is None:
            continue  # its CLI is not installed here: check says so, and pi is what this test is about
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"harness={harness}" in check.stdout
        other = "pi" if harness == "opencode" else "opencode"
        assert f"harness {other} (crucible-plugin-harness-{other}, not used by this run)" in check.stdout
    assert fake.requests == []  # a check spends nothing


def test_a_run_granting_broker_tools_is_refused_by_name_before_anything_starts(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    domain = tmp_path / "domain"
    manifest = write_domain(domain, "pi", endpoint_env(fake))
    # the default: every installed broker tool is granted
    manifest.write_text(manifest.read_text().replace("[agent.broker]\nenabled = false\n", ""))
    done = crucible_run(manifest, "pi", pi_cli, tmp_path, "--iterations", "1")
    assert done.returncode == 10, done.stderr
    assert "harness pi has no MCP client, so it cannot call the broker tools this run grants" in done.stderr
    assert "set [agent.broker] enabled = false (or tools = []), or use harness opencode" in done.stderr
    assert not (domain / "state" / "session.jsonl").exists() and fake.requests == []


def test_a_turn_without_a_key_is_refused_before_anything_is_spent(
    fake: FakeOpenAIChat, pi_cli: Path, tmp_path: Path
) -> None:
    manifest = write_domain(tmp_path / "domain", "pi", {})
    done = crucible_run(manifest, "pi", pi_cli, tmp_path, "--iterations", "1")
    assert done.returncode == 4, done.stderr
    assert "no key for the inference endpoint: set OPENAI_API_KEY" in done.stderr
    assert not (tmp_path / "domain" / "state" / "session.jsonl").exists() and fake.requests == []
