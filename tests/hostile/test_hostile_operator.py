"""The operator's values: budget caps bounded at every entry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from crucible_core.control.ledger import Ledger

# -- 8. caps that are not finite or in range ---------------------------------------------------


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, str]]:
    """The real `crucible` entry point, in this process, in an empty directory."""
    from crucible_core.cli.main import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    return run


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--max-cost", "nan"),
        ("run", "--max-cost", "inf"),
        ("run", "--max-cost", "1e308"),
        ("run", "--iterations", "10000000000"),
        ("budget", "--max-cost", "nan"),
        ("budget", "--max-cost", "-inf"),
        ("budget", "--iterations", "10000000000"),
    ],
)
def test_a_budget_flag_out_of_range_is_a_usage_error_that_names_the_range(
    cli: Callable[..., tuple[int, str]], args: tuple[str, ...]
) -> None:
    code, err = cli(*args)
    assert code == 64, err
    assert "from 0 to" in err and err.count("\n") == 1, err


def test_a_ledger_line_with_a_cap_out_of_range_is_not_replayed(tmp_path: Path) -> None:
    # What an older engine wrote, or someone appended: json.dumps writes NaN and Infinity literally.
    path = tmp_path / "admissions.jsonl"
    caps = [
        {"max_time": float("nan")},
        {"max_cost": float("nan")},
        {"max_cost": float("inf")},
        {"max_time": 1e308},
        {"iterations": 10**12},
        {"iterations": 7},
    ]
    lines = [
        {"v": 1, "kind": "admitted", "key": f"k{n}", "seq": n, "ts": 0, "input": "set-budget", **cap}
        for n, cap in enumerate(caps, 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ledger = Ledger(path)
    assert [(e.key, e.payload) for e in ledger.entries.values()] == [("k6", {"iterations": 7})]
    assert len(ledger.problems) == 5 and all("from 0 to" in p for p in ledger.problems), ledger.problems
