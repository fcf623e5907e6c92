"""The docs/plugins.md worked example: a third-party judge installed from its own directory,
chosen by `[judge] kind`, and used by both `crucible check` and `crucible run`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import EXAMPLES, crucible_env, run_crucible
from tests.e2e.session import events, rows

EXAMPLE = EXAMPLES / "plugin_judge_pytest"
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example distribution pip-installed (not editable) into a directory of its own."""
    target = tmp_path_factory.mktemp("judge-pytest-site")
    subprocess.run(
        [*PIP_INSTALL, "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
        capture_output=True,
    )
    return target


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE / "demo", tmp_path / "demo", ignore=shutil.ignore_patterns("workspace", "state"))
    return tmp_path / "demo" / "crucible.toml"


def test_the_installed_judge_is_listed(site: Path) -> None:
    listing = run_crucible("plugins", env=crucible_env(PYTHONPATH=str(site)))
    assert listing.returncode == 0, listing.stdout
    assert "crucible-plugin-judge-pytest 0.1.0  (entry point judge_pytest)" in listing.stdout
    assert "judge: pytest" in listing.stdout


def test_check_and_run_measure_through_the_chosen_judge(site: Path, demo: Path) -> None:
    env = crucible_env(PYTHONPATH=str(site))
    check = run_crucible("check", "--manifest", demo, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "plugins: world=git judge=pytest backend=command" in check.stdout
    assert (
        "settings: judge pytest (crucible-plugin-judge-pytest) [judge]: args=[test_calc.py]" in check.stdout
    )
    # 1 of 3 tests passes at the start: only the pytest judge can say so (there is no measure_cmd)
    assert "judge pytest measured the workspace: valid=True score=1.0 1 passed" in check.stdout
    assert not (demo.parent / "workspace").exists()

    run = run_crucible("run", "--manifest", demo, "-n", "2", "--ui", "headless", env=env)
    assert run.returncode == 0, run.stderr
    assert [(r["decision"], r["score"], r["note"]) for r in rows(demo)] == [
        ("baseline", 1, "1 passed"),
        ("keep", 2, "2 passed"),
        ("keep", 3, "3 passed"),
    ]
    start = next(e for e in events(demo) if e["kind"] == "start")
    assert start["judge"] == "pytest" and start["gate"] == "passing tests"
    # measuring left nothing behind in the candidate's tree
    left = {p.name for p in (demo.parent / "workspace").iterdir()}
    assert {"calc.py", "test_calc.py"} <= left and not left & {".pytest_cache", "__pycache__"}


def test_an_unknown_judge_kind_suggests_and_creates_nothing(site: Path, demo: Path) -> None:
    demo.write_text(demo.read_text().replace('kind = "pytest"', 'kind = "pytset"'))
    env = crucible_env(PYTHONPATH=str(site))
    run = run_crucible("run", "--manifest", demo, "-n", "1", env=env)
    assert run.returncode == 12, run.stderr
    assert "unknown judge 'pytset'" in run.stderr and "did you mean 'pytest'" in run.stderr
    assert not (demo.parent / "state").exists() and not (demo.parent / "workspace").exists()
    check = run_crucible("check", "--manifest", demo, env=env)
    assert check.returncode == 13 and "unknown judge 'pytset'" in check.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('argz = ["-x"]', "unknown key 'argz' in [judge] (did you mean args?)"),
        ('args = "-x"', "[judge].args: expected an array of strings"),
    ],
)
def test_the_judge_validates_its_own_keys(site: Path, demo: Path, line: str, expected: str) -> None:
    demo.write_text(demo.read_text().replace('args = ["test_calc.py"]', line))
    done = run_crucible("check", "--manifest", demo, env=crucible_env(PYTHONPATH=str(site)))
    assert done.returncode == 10, done.stdout + done.stderr
    assert (
        expected in done.stderr
        and "crucible-plugin-judge-pytest, which registered judge 'pytest'" in done.stderr
    )


def test_the_command_judge_still_requires_measure_cmd(demo: Path) -> None:
    demo.write_text(demo.read_text().replace('kind = "pytest"', ""))
    done = run_crucible("check", "--manifest", demo)
    assert done.returncode == 10
    assert "[judge].measure_cmd is required" in done.stderr


def test_the_guide_shows_the_example_sources_verbatim() -> None:
    guide = (EXAMPLES.parent / "docs" / "plugins.md").read_text()
    for source in (
        "pyproject.toml",
        "src/crucible_judge_pytest/__init__.py",
        "src/crucible_judge_pytest/judge.py",
    ):
        assert (EXAMPLE / source).read_text().strip() in guide, source
