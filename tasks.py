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
from concurrent.futures import ThreadPoolExecutor
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
    "plugins/harness_acp",
    "plugins/harness_endpoint",
    "plugins/harness_opencode",
    "plugins/harness_pi",
    "plugins/deploy_kubernetes",
    "plugins/broker_mcp",
    "plugins/service_oubliette",
    "plugins/console_rich",
    "plugins/flow_page",
    "plugins/service_transports",
    "plugins/publish_github",
    "plugins/workflow_starlark",
    "plugins/lane_playbook",
    "plugins/search_wide",
    "plugins/results_md",
    "plugins/telemetry_otlp",
    "plugins/run_records",
    "plugins/world_composite",
    "plugins/packs",
    "plugins/distress",
    "plugins/lane_plan",
    "plugins/testkit",
    "plugins/task_agent",
    "plugins/scope",
]
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
# The installer of the venv's packages (tasks.py falls back to pip without it); uv's own cache
# (~/.cache/uv) keeps what it fetched for the next fresh venv.
UV_REQUIREMENT = "uv>=0.4"
# pytest-xdist workers for a whole-suite run, sized for the 2-core CI machine (see _parallel).
PARALLEL_WORKERS = 4
# The agent CLIs the harness tests drive, pinned; each is installed under .cache/<dir> when npm
# exists, and its path handed to the tests in the named variable (without npm those tests skip).
AGENT_CLIS = [
    # (npm package@version..., directory under .cache, binary ("": the bin directory), variable)
    (("@anthropic-ai/claude-code@2.1.328",), "claude-cli", "claude", "CRUCIBLE_TEST_CLAUDE_CLI"),
    (("@openai/codex@0.171.0",), "codex-cli", "codex", "CRUCIBLE_TEST_CODEX_CLI"),
    (("opencode-ai@1.18.33",), "opencode-cli", "opencode", "CRUCIBLE_TEST_OPENCODE_CLI"),
    (("@mariozechner/pi-coding-agent@0.73.1",), "pi-cli", "pi", "CRUCIBLE_TEST_PI_CLI"),
    # The ACP agents: claude-agent-acp reports usage and cost and does its own file work;
    # claude-code-acp routes file and terminal work through the client.
    (
        ("@zed-industries/claude-agent-acp@0.23.1", "@zed-industries/claude-code-acp@0.16.2"),
        "acp-agents",
        "",
        "CRUCIBLE_TEST_ACP_AGENTS",
    ),
]


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
    editable: list[str | Path] = []
    for member in _members():
        editable += ["-e", member]
    uv = _uv()
    if uv is not None:
        # One resolution for everything, its downloads and builds side by side: about a minute
        # from nothing, where pip (below) takes several on a slow index. Bytecode is compiled
        # now, as pip does: without it every process the tests start compiles its imports anew
        # wherever PYTHONDONTWRITEBYTECODE is set (about 0.3 s of CPU per `crucible check`).
        install = [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", BIN / "python"]
        sh(*install, "-r", DEV_REQUIREMENTS, *editable)
    else:
        pip = [BIN / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        sh(*pip, "-r", DEV_REQUIREMENTS)
        # Every member builds with hatchling, which the first step installed (with `editables`, its
        # editable-build requirement): building them in the venv saves pip a fresh isolated build
        # environment per member, each fetching hatchling again.
        sh(*pip, "--no-build-isolation", *editable)
    stamp_file.write_text(stamp)


def _uv() -> Path | None:
    """uv in the venv, pip-installed there first; None (pip installs then) if it cannot be had."""
    uv = BIN / "uv"
    if not uv.exists():
        try:
            sh(BIN / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", UV_REQUIREMENT)
        except subprocess.CalledProcessError:
            print(f"could not install {UV_REQUIREMENT}: pip installs the venv instead (slower)", flush=True)
            return None
    return uv if uv.exists() else None


def ensure_agent_clis() -> dict[str, str]:
    """Install the pinned agent CLIs for the harness tests; the variables naming those installed.

    The installs run side by side (each mostly waits on the registry); each one's output is
    printed as one block when it ends, so the logs of several never interleave.
    """
    npm = shutil.which("npm")
    with ThreadPoolExecutor(max_workers=len(AGENT_CLIS)) as pool:
        found = pool.map(lambda cli: _ensure_agent_cli(npm, *cli), AGENT_CLIS)
        return dict(item for item in found if item is not None)


def _ensure_agent_cli(
    npm: str | None, packages: tuple[str, ...], folder: str, binary: str, variable: str
) -> tuple[str, str] | None:
    prefix = ROOT / ".cache" / folder
    marker = prefix / ".installed"
    wanted = " ".join(packages)
    if not (marker.exists() and marker.read_text() == wanted):
        if npm is None:
            print(f"npm not found: the tests needing {wanted} will be skipped", flush=True)
            return None
        prefix.mkdir(parents=True, exist_ok=True)
        argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print("+", " ".join(argv), "\n" + done.stdout.rstrip(), flush=True)
        if done.returncode != 0:
            print(f"could not install {wanted}: its tests will be skipped", flush=True)
            return None
        marker.write_text(wanted)
    cli = prefix / "node_modules" / ".bin" / binary
    return (variable, str(cli)) if cli.exists() else None


def demo(extra: list[str]) -> int:
    ensure_venv()
    counter = ROOT / "examples" / "counter"
    for leftover in ("workspace", "state"):
        shutil.rmtree(counter / leftover, ignore_errors=True)
    args = [BIN / "crucible", "--manifest", counter / "crucible.toml", "--iterations", "6", *extra]
    return subprocess.run([str(a) for a in args]).returncode


def test(extra: list[str]) -> int:
    # The agent CLIs install while the venv does: both mostly wait on their registries.
    with ThreadPoolExecutor(max_workers=1) as pool:
        agent_clis = pool.submit(ensure_agent_clis)
        ensure_venv()
        env = {**os.environ, **agent_clis.result()}
    # The venv first on PATH, as an activated venv has it: the `python3` that tests, examples and
    # their measure scripts start is then the venv's interpreter, not a version-manager shim that
    # costs a shell and a lookup per start (about 0.1-0.3 s, hundreds of times per suite).
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    argv = [str(BIN / "python"), "-m", "pytest", *_parallel(extra), *extra]
    return subprocess.run(argv, cwd=ROOT, env=env).returncode


def _parallel(extra: list[str]) -> list[str]:
    """pytest-xdist's options for a whole-suite run: PARALLEL_WORKERS workers, whatever the cores.

    Most tests wait on a subprocess, a socket or a git command more than they compute, so more
    workers than cores still shortens the run. A run given test paths, or its own -n, --dist or
    `-p no:xdist`, stays as asked (a few paths run faster in one process than spread over workers).
    """
    named = [a for a in extra if not a.startswith("-") and Path(a.split("::")[0]).exists()]
    if named or any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in extra):
        return []
    return ["-n", str(PARALLEL_WORKERS), "--dist", "worksteal"]


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
