"""The CLI surface: --help everywhere, --version, init, check, packs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import EXAMPLES, crucible_env, run_crucible
from tests.e2e.session import rows


def test_version() -> None:
    done = run_crucible("--version")
    assert done.returncode == 0 and done.stdout.startswith("crucible 0.")


@pytest.mark.parametrize("command", ["run", "check", "init", "plugins"])
def test_every_command_has_help(command: str) -> None:
    done = run_crucible(command, "--help")
    assert done.returncode == 0 and "Usage: crucible" in done.stdout


def test_unknown_command_is_a_usage_error() -> None:
    done = run_crucible("frobnicate")
    assert done.returncode == 64 and "frobnicate" in done.stderr


def test_init_scaffolds_then_refuses_to_overwrite(tmp_path: Path) -> None:
    done = run_crucible("init", "--dir", tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "crucible.toml"
    original = manifest.read_text()
    assert "[judge]" in original and (tmp_path / "measure.sh").stat().st_mode & 0o100
    manifest.write_text(original + "\n# my edits\n")
    again = run_crucible("init", "--dir", tmp_path)
    assert again.returncode == 11 and "refusing to overwrite" in again.stderr
    assert manifest.read_text().endswith("# my edits\n")


def test_check_passes_on_the_counter_and_leaves_no_workspace(example) -> None:
    manifest = example("counter")
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "plugins: world=git judge=command backend=command" in done.stdout
    assert "judge command measured the workspace: valid=True score=0.0" in done.stdout
    assert "no [judge.selftest]" in done.stdout
    assert not (manifest.parent / "workspace").exists()
    run = run_crucible("--manifest", manifest, "--iterations", "1")
    assert run.returncode == 0, run.stderr


def test_check_runs_the_selftest(example) -> None:
    manifest = example("counter")
    text = (
        manifest.read_text()
        + '\n[judge.selftest]\ngood_cmd = "echo 4 > value.txt"\nbad_cmd = "echo 1 > value.txt"\nruns = 2\n'
    )
    manifest.write_text(text)
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "gate self-test: good 4 beats bad 1" in done.stdout
    manifest.write_text(text.replace("echo 4", "echo 0"))
    failing = run_crucible("check", "--manifest", manifest)
    assert failing.returncode == 13 and "does not beat" in failing.stdout


def test_check_restores_an_existing_workspace_after_the_selftest(example) -> None:
    manifest = example("counter")
    text = (
        manifest.read_text()
        + '\n[judge.selftest]\ngood_cmd = "echo 4 > value.txt"\nbad_cmd = "echo 1 > value.txt"\n'
    )
    manifest.write_text(text)
    assert run_crucible("--manifest", manifest, "--iterations", "2").returncode == 0
    assert run_crucible("check", "--manifest", manifest).returncode == 0
    assert (manifest.parent / "workspace" / "value.txt").read_text().strip() == "2"


def test_check_warns_when_the_gate_is_reachable_by_the_agent(example) -> None:
    manifest = example("counter")
    manifest.write_text(
        manifest.read_text()
        .replace('inject = ["measure.sh"]', "")
        .replace("cp value.txt bump.sh", "cp value.txt bump.sh measure.sh")
    )
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 0, done.stdout
    assert "WARN measure_cmd names 'measure.sh' inside the workspace" in done.stdout


def test_check_fails_on_a_broken_measure_contract(example) -> None:
    manifest = example("counter")
    (manifest.parent / "measure.sh").write_text("#!/bin/sh\necho 42\n")
    done = run_crucible("check", "--manifest", manifest)
    assert done.returncode == 13 and "FAIL measure contract" in done.stdout


def test_a_pack_installed_as_a_distribution_runs_by_name(tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(EXAMPLES / "pack_hello"),
        ],
        check=True,
        capture_output=True,
    )
    env = crucible_env(PYTHONPATH=str(site))
    listing = run_crucible("plugins", env=env)
    assert "pack: hello" in listing.stdout
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "crucible"), "run", "--pack", "hello", "--iterations", "5"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    manifest = work / "hello" / "crucible.toml"
    assert [r["score"] for r in rows(manifest)] == [1, 2, 3]
    assert (work / "hello" / "workspace" / "greetings.txt").read_text().split() == [
        "hello",
        "hola",
        "bonjour",
    ]
