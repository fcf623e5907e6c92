"""Wide rounds below the CLI: the fold and recovery class, the graph template and the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from crucible_core.contract.fold import fold_objects
from crucible_core.contract.recovery import RecoveryClass, classify
from crucible_core.errors import ManifestError
from crucible_core.plan import ir
from crucible_search_wide.graph import admitted_wide_plan, slot_of
from crucible_search_wide.round import WideSettings, wide_settings
from crucible_search_wide.settings import SearchSettings
from tests.core.test_resume_fold import ev, head, iteration, row


def wide_row(slot: int, verdict: str, score: float, best: float, note: str, **extra: object) -> dict:
    event = row(0, verdict, score, best, **extra)  # every wide row sits at iter 0
    event["row"]["phase"] = "wide"
    event["row"]["note"] = note
    return event


def test_a_log_that_ends_inside_the_wide_round_classifies_died_in_wide_round() -> None:
    log = [*head(), ev("phase", 102, phase="wide", iter=0), ev("turn", 103, iter=1, ok=True, cost=0.25)]
    folded = fold_objects(log)
    assert classify(folded).cls is RecoveryClass.DIED_IN_WIDE_ROUND
    assert folded.spent == 0.25  # the finished candidate's spend survives


def test_a_decided_wide_keep_moves_the_best_but_spends_no_iteration() -> None:
    log = [
        *head(),
        ev("phase", 102, phase="wide", iter=0),
        wide_row(1, "discard", 5.0, 0.0, "wide candidate 1 (a): cost 5"),
        wide_row(2, "keep", 7.0, 7.0, "wide round decided: candidate 2, kept", snapshot="tokw", sha="shaw"),
    ]
    folded = fold_objects(log)
    assert (folded.iteration, folded.kept, folded.discarded) == (0, 0, 0)
    assert folded.best_token == "tokw" and folded.best_score == 7.0 and folded.kept_shas == ["shaw"]
    assert classify(folded).cls is RecoveryClass.DIED_BETWEEN_ITERATIONS
    deep = fold_objects(log + iteration(1, True, 110))
    assert (deep.iteration, deep.kept, deep.best_token) == (1, 1, "tok1")


def test_the_round_graph_isolates_each_proposal_and_measures_once_after_all_of_them() -> None:
    plan = admitted_wide_plan([1, 3])
    tasks = plan.by_name()
    assert list(plan.order) == ["propose-1", "propose-3", "measure", "decide"]
    assert all(tasks[f"propose-{s}"].isolation is ir.Isolation.WORKTREE for s in (1, 3))
    assert tasks["measure"].depends_on == ("propose-1", "propose-3")
    assert tasks["measure"].isolation is ir.Isolation.SHARED
    assert admitted_wide_plan([]).by_name()["measure"].depends_on == ()  # a resume with all proposed
    assert (slot_of("propose-12"), slot_of("measure"), slot_of("propose-x")) == (12, None, None)


def test_cli_overrides_and_their_refusals() -> None:
    search = SearchSettings(wide=2, approaches=("a", "b", "c"), policy="halving", policy_k=1)
    assert wide_settings(True, search, None, None) == WideSettings(2, ("a", "b"), "halving", 1)
    assert wide_settings(True, search, 3, 2) == WideSettings(3, ("a", "b", "c"), "halving", 2)
    assert wide_settings(True, search, 0, None) is None
    assert wide_settings(True, None, None, None) is None
    with pytest.raises(ManifestError, match="--wide = 4 needs at least 4"):
        wide_settings(True, search, 4, None)
    with pytest.raises(ManifestError, match=r"--wide-keep must be between 1 and \[search\].wide \(2\)"):
        wide_settings(True, search, None, 3)


def test_a_world_that_cannot_fork_refuses_the_round_by_name(tmp_path: Path) -> None:
    from crucible_search_wide.round import refuse_unforkable
    from crucible_world_composite.world import CompositeWorld

    with pytest.raises(ManifestError, match="the 'composite' world cannot") as err:
        refuse_unforkable(CompositeWorld(tmp_path, ()), "composite")
    assert "--wide" in (err.value.hint or "")


def test_a_pure_deep_run_never_imports_the_round_and_a_left_over_round_is_still_forgotten(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    # the registered strategy, asked for a round without a width: nothing of the round loads
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from crucible_core.run.rounds import RoundRequest\n"
        "from crucible_search_wide import _Wide\n"
        f"request = RoundRequest(loaded=None, settings=None, private_dir=Path({str(tmp_path)!r}))\n"
        "assert _Wide().prepare(request) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('crucible_search_wide')))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "crucible_search_wide.round" not in shown and "crucible_search_wide.strategy" not in shown
    # a round an earlier run left in this state directory still goes through the strategy, which
    # forgets it on a fresh run
    from crucible_core.run.rounds import RoundRequest
    from crucible_search_wide import _Wide

    left = tmp_path / "wide" / "forks"
    left.mkdir(parents=True)
    request = RoundRequest(loaded=_manifest_without_search(tmp_path), settings=None, private_dir=tmp_path)
    assert _Wide().prepare(request) is None
    assert not (tmp_path / "wide").exists()


def _manifest_without_search(tmp_path: Path) -> object:
    from crucible_core.manifest.loader import load_manifest

    return load_manifest(Path(__file__).resolve().parents[2] / "examples" / "counter" / "crucible.toml")
