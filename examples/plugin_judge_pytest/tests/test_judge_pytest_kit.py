"""The pytest judge, tested the way a plugin author tests a judge: with crucible's test kit.

The kit's memory world holds the demo's files and its scripted agent makes one edit per turn;
the judge under test is the only real driver, so the scores below are pytest's own counts.
"""

from pathlib import Path

import crucible_judge_pytest
from crucible_core import api
from crucible_testkit import CrucibleKit

DEMO = Path(__file__).resolve().parent.parent / "demo"
CALC = (DEMO / "calc.py").read_text()
FIX_ADD = CALC.replace("a - b  # bug: subtracts", "a + b")
BREAK_NEG = FIX_ADD.replace("return -a", "return a")
FIX_BOTH = FIX_ADD.replace("a + b  # bug: adds", "a * b")


def test_the_judge_scores_passing_tests_through_the_real_loop(crucible_kit: CrucibleKit) -> None:
    crucible_kit.register(crucible_judge_pytest)

    done = crucible_kit.run(
        files={"calc.py": CALC, "test_calc.py": (DEMO / "test_calc.py").read_text()},
        turns=[{"calc.py": FIX_ADD}, {"calc.py": BREAK_NEG}, {"calc.py": FIX_BOTH}],
        manifest={"judge": {"kind": "pytest", "direction": "higher", "args": ["test_calc.py"]}},
        iterations=3,
    )

    assert [(row.decision, row.score, row.note) for row in done.rows] == [
        ("baseline", 1.0, "1 passed"),
        ("keep", 2.0, "2 passed"),
        ("discard", 1.0, "1 passed"),
        ("keep", 3.0, "3 passed"),
    ]
    assert done.of_kind("start")[0]["gate"] == "passing tests"
    assert (done.workspace / "calc.py").read_text() == FIX_BOTH
    # measuring left nothing behind for the memory world to keep
    assert not {".pytest_cache", "__pycache__"} & {p.name for p in done.workspace.iterdir()}


def test_a_key_the_judge_does_not_own_is_refused_before_anything_runs(crucible_kit: CrucibleKit) -> None:
    crucible_kit.register(crucible_judge_pytest)
    try:
        crucible_kit.run(files={}, iterations=1, manifest={"judge": {"kind": "pytest", "argz": ["-x"]}})
    except api.ManifestError as exc:
        assert "unknown key 'argz' in [judge]" in exc.render()
    else:
        raise AssertionError("the unknown key was accepted")
    assert not (crucible_kit.root / "state").exists()
