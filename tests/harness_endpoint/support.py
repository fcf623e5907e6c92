"""Helpers for the opencode and pi harness tests: the pinned CLIs, turn environments, a counter domain."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_api import Script, call, say
from tests.fakes.openai_chat import FakeOpenAIChat
from tests.harness_claude.support import MEASURE

ROOT = Path(__file__).resolve().parents[2]
# A model the pricing table knows (USD 2 in, 8 out per million tokens); the fake reports 1200
# input and 80 output tokens per call.
MODEL = "gpt-4.1"
PER_CALL = (1200 * 2.0 + 80 * 8.0) / 1_000_000
TEST_KEY = "sk-proj-crucible-endpoint-test-key-0000"

# Where `python3 tasks.py test` installs each pinned CLI, and the variable it hands the path in.
CLIS = {
    "opencode": ("CRUCIBLE_TEST_OPENCODE_CLI", ROOT / ".cache/opencode-cli/node_modules/.bin/opencode"),
    "pi": ("CRUCIBLE_TEST_PI_CLI", ROOT / ".cache/pi-cli/node_modules/.bin/pi"),
}
BIN_ENV = {"opencode": "CRUCIBLE_OPENCODE_BIN", "pi": "CRUCIBLE_PI_BIN"}


def cli_path(harness: str) -> Path | None:
    variable, default = CLIS[harness]
    configured = os.environ.get(variable)
    candidate = Path(configured) if configured else default
    return candidate if candidate.exists() else None


def require_cli(harness: str) -> Path:
    path = cli_path(harness)
    if path is None:
        pytest.skip(
            f"the {harness} CLI is not installed: `python3 tasks.py test` installs the pinned release "
            f"under .cache/ (needs npm), or set {CLIS[harness][0]}"
        )
    return path


def edit_script(harness: str, value: Path) -> Script:
    """The model reads value.txt, replaces its 1 with a 2 and says so, in each CLI's own tools."""
    if harness == "opencode":
        return Script(
            [
                call("read", filePath=str(value)),
                call("edit", filePath=str(value), oldString="1", newString="2"),
                say("Raised the value."),
            ]
        )
    return Script(
        [
            call("read", path=str(value)),
            call("edit", path=str(value), edits=[{"oldText": "1", "newText": "2"}]),
            say("Raised the value."),
        ]
    )


def endpoint_env(fake: FakeOpenAIChat, **extra: str) -> dict[str, str]:
    """The [agent].env that points a turn at the fake endpoint."""
    return {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": TEST_KEY, **extra}


def turn_env(fake: FakeOpenAIChat, harness: str, cli: Path, **extra: str) -> dict[str, str]:
    """A whole turn environment for driving a harness directly."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        BIN_ENV[harness]: str(cli),
        **endpoint_env(fake, **extra),
    }


def write_domain(root: Path, harness: str, agent_env: dict[str, str], *, extra: str = "") -> Path:
    """A counter-like domain (value.txt is the score) whose agent is `harness` on the local backend.

    The broker is off: pi cannot call it (a run granting its tools is refused), and the opencode
    broker test turns it on itself.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "value.txt").write_text("1\n")
    measure = root / "measure.sh"
    measure.write_text(MEASURE)
    measure.chmod(0o755)
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in agent_env.items()) + " }"
    manifest = root / "crucible.toml"
    manifest.write_text(
        f"""
[repo]
path = "."

[workspace]
dir = "workspace"
setup_cmd = "mkdir -p workspace && cp value.txt workspace/"
inject = ["measure.sh"]

[agent]
backend = "local"
harness = "{harness}"
model = "claude-sonnet-4-6"
goal = "Raise the integer in value.txt."
turn_timeout = 240
env = {env}

[agent.opencode]
model = "{MODEL}"

[agent.pi]
model = "{MODEL}"

[agent.broker]
enabled = false

[judge]
measure_cmd = "./measure.sh"
direction = "higher"
objective = "value"
{extra}"""
    )
    return manifest


def assert_no_secret_written(domain: Path, secrets: tuple[str, ...], *outputs: str) -> None:
    """The whole-run canary scan (tests/hostile/test_canary.py) over a finished domain: no secret, in
    any form (plain or base64), in the state, RESULTS.md, the workspace repository's files and
    objects (commit messages carry turn notes), nor in what crucible printed."""
    from tests.hostile.test_canary import forms, git_objects

    workspace = domain / "workspace"
    texts = {f"output {i}": out.encode() for i, out in enumerate(outputs)}
    for path in [*(domain / "state").rglob("*"), workspace / "RESULTS.md", *(workspace / ".git").rglob("*")]:
        if path.is_file() and "objects" not in path.relative_to(domain).parts:
            texts[str(path)] = path.read_bytes()
    commits = 0
    for index, (kind, body) in enumerate(git_objects(workspace)):
        commits += kind == "commit"
        texts[f"{kind} object {index}"] = body
    assert commits >= 2 and any(name.endswith("session.jsonl") for name in texts)
    for name, data in texts.items():
        text = data.decode("utf-8", "replace")
        for secret in secrets:
            for form in forms(secret):
                assert form not in text, f"{form!r} (a form of {secret!r}) in {name}"


def agent_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session log's agent events (nested under `kind: agent`), in order."""
    return [e["event"] for e in events if e["kind"] == "agent"]
