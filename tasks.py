#!/usr/bin/env python3
"""Developer entry point: installs crucible into .venv and runs the demo, the tests, lint or benchmarks.

Needs only Python >= 3.11, pip and git:
    python3 tasks.py demo     # run examples/counter for 6 iterations
    python3 tasks.py test     # the whole test suite (what CI runs)
    python3 tasks.py lint     # ruff and mypy --strict
    python3 tasks.py bench    # the benchmark table (see bench/README.md)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
MEMBERS = [
    "crucible_core",
    "plugins/world_git",
    "plugins/judge_command",
    "plugins/backend_local",
    "plugins/backend_openshell",
    "plugins/harness_claude",
    "plugins/harness_codex",
    "plugins/deploy_kubernetes",
    "plugins/broker_mcp",
    "plugins/service_oubliette",
]
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
# The Claude Code CLI the harness tests drive, pinned; installed under .cache/ when npm exists.
CLAUDE_CLI_PACKAGE = "@anthropic-ai/claude-code@2.1.328"
CLAUDE_PREFIX = ROOT / ".cache" / "claude-cli"
# The Codex CLI the codex harness tests drive, pinned the same way, under .cache/codex-cli.
CODEX_CLI_PACKAGE = "@openai/codex@0.171.0"
CODEX_PREFIX = ROOT / ".cache" / "codex-cli"


def sh(*argv: str | Path, **kwargs) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    subprocess.run([str(a) for a in argv], check=True, **kwargs)


def _members() -> list[Path]:
    return [ROOT / m for m in MEMBERS if (ROOT / m / "pyproject.toml").exists()]


def _install_stamp() -> str:
    digest = hashlib.sha256()
    for path in [DEV_REQUIREMENTS, *(m / "pyproject.toml" for m in _members())]:
        digest.update(path.read_bytes())
    for pyproject in sorted((ROOT / "examples").glob("*/pyproject.toml")):
        digest.update(pyproject.read_bytes())
    return digest.hexdigest()


def ensure_venv() -> None:
    stamp_file = VENV / ".crucible-install"
    stamp = _install_stamp()
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [BIN / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    sh(*pip, "-r", DEV_REQUIREMENTS)
    editable: list[str | Path] = []
    for member in _members():
        editable += ["-e", member]
    sh(*pip, *editable)
    stamp_file.write_text(stamp)


def ensure_npm_cli(package: str, prefix: Path, label: str) -> None:
    """Install a pinned agent CLI for its harness tests; without npm those tests skip."""
    marker = prefix / ".installed"
    if marker.exists() and marker.read_text() == package:
        return
    npm = shutil.which("npm")
    if npm is None:
        print(f"npm not found: the {label} tests will be skipped", flush=True)
        return
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        sh(npm, "install", "--no-audit", "--no-fund", "--prefix", prefix, package)
    except subprocess.CalledProcessError:
        print(f"could not install the {label}: its tests will be skipped", flush=True)
        return
    marker.write_text(package)


def demo(extra: list[str]) -> int:
    ensure_venv()
    counter = ROOT / "examples" / "counter"
    for leftover in ("workspace", "state"):
        shutil.rmtree(counter / leftover, ignore_errors=True)
    args = [BIN / "crucible", "--manifest", counter / "crucible.toml", "--iterations", "6", *extra]
    return subprocess.run([str(a) for a in args]).returncode


def test(extra: list[str]) -> int:
    ensure_venv()
    ensure_npm_cli(CLAUDE_CLI_PACKAGE, CLAUDE_PREFIX, "Claude Code CLI")
    ensure_npm_cli(CODEX_CLI_PACKAGE, CODEX_PREFIX, "Codex CLI")
    env = dict(os.environ)
    cli = CLAUDE_PREFIX / "node_modules" / ".bin" / "claude"
    if cli.exists():
        env["CRUCIBLE_TEST_CLAUDE_CLI"] = str(cli)
    codex = CODEX_PREFIX / "node_modules" / ".bin" / "codex"
    if codex.exists():
        env["CRUCIBLE_TEST_CODEX_CLI"] = str(codex)
    return subprocess.run([str(BIN / "python"), "-m", "pytest", *extra], cwd=ROOT, env=env).returncode


def lint(extra: list[str]) -> int:
    ensure_venv()
    first = subprocess.run([str(BIN / "ruff"), "check", ".", *extra], cwd=ROOT).returncode
    second = subprocess.run([str(BIN / "ruff"), "format", "--check", "."], cwd=ROOT).returncode
    # mypy reads its settings (strict, the packages to check) from pyproject.toml.
    third = subprocess.run([str(BIN / "mypy")], cwd=ROOT).returncode
    return first or second or third


def bench(extra: list[str]) -> int:
    ensure_venv()
    return subprocess.run([str(BIN / "python"), str(ROOT / "bench" / "run.py"), *extra], cwd=ROOT).returncode


COMMANDS = {"demo": demo, "test": test, "lint": lint, "bench": bench}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        return 64
    return COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
