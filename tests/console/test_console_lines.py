"""The plain console, fed session-log events with timestamps: its exact lines (no terminal here)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from crucible_core.contract import wire
from crucible_core.contract.plain_text import plain
from crucible_core.reporters.console import ConsoleReporter, HeadlessReporter
from crucible_core.reporters.console_text import shorten
from crucible_core.reporters.sparkline import sparkline

T0 = 1_700_000_000.0


def start(ts: float, iterations: int | None = 40, resumed: bool = False) -> dict[str, Any]:
    return {
        "v": 1,
        "ts": ts,
        "kind": "start",
        "goal": "g",
        "gate": "value",
        "model": "",
        "namespace": "",
        "iters_total": iterations or 0,
        "max_cost": 0.0,
        "max_secs": 0,
        "version": "0.1.0",
        "direction": "higher",
        "backend": "command",
        "world": "git",
        "budget": {"iterations": iterations, "max_cost": None, "max_time": None},
        "resumed": resumed,
    }


def row(ts: float, it: int, decision: str, score: float | None, best: float, **extra: Any) -> dict[str, Any]:
    fields = {"iter": it, "decision": decision, "note": "", "detail": "", "score": score, "best": best}
    fields["baseline"] = 0
    fields.update(extra)
    return {"v": 1, "ts": ts, "kind": "row", "row": fields, "solved": False}


def budget(ts: float, active: float, iterations: int | None = None, done: int = 0) -> dict[str, Any]:
    caps = {"iterations": iterations, "max_cost": None, "max_time": None}
    return {
        "v": 1,
        "ts": ts,
        "kind": "budget",
        "spent": 0.0,
        "elapsed_secs": int(active),
        "active_s": active,
        "iterations_done": done,
        "caps": caps,
    }


def note(ts: float, msg: str, level: str = "info") -> dict[str, Any]:
    return {"v": 1, "ts": ts, "kind": "note", "msg": msg, "level": level}


def phase(ts: float, name: str, it: int) -> dict[str, Any]:
    return {"v": 1, "ts": ts, "kind": "phase", "phase": name, "iter": it}


def summary(ts: float, best: float, kept: int, discarded: int) -> dict[str, Any]:
    return {
        "v": 1,
        "ts": ts,
        "kind": "summary",
        "rows": [],
        "gate": "value",
        "best_score": best,
        "baseline_score": 0,
        "kept": kept,
        "discarded": discarded,
        "spent": 0.25,
    }


def shutdown(ts: float, outcome: str = "finished", reason: str = "iterations spent (12)") -> dict[str, Any]:
    return {"v": 1, "ts": ts, "kind": "shutdown", "outcome": outcome, "reason": reason}


def show(reporter_cls: type[ConsoleReporter], events: list[dict[str, Any]], total: int | None = 40) -> str:
    out = io.StringIO()
    reporter = reporter_cls(out, total, clock=lambda: 0.0)
    for event in events:
        reporter.on_event(event)
    reporter.close()
    return out.getvalue()


LONG_NOTE = "the measure found the candidate slower than the incumbent on every benchmark in the suite"


def a_run() -> list[dict[str, Any]]:
    """Twelve iterations: kept and discarded, an invalid reading, a long note, a budget change."""
    events = [start(T0), row(T0 + 1, 0, "baseline", 0, 0)]
    best = 0.0
    for it in range(1, 13):
        ts = T0 + 1 + it * 10
        if it == 3:
            events.append(
                row(ts, it, "discard", None, best, valid=False, note="value.txt does not hold a whole number")
            )
        elif it == 4:
            events.append(row(ts, it, "discard", 1, best, valid=True, note=LONG_NOTE))
        else:
            best += 1
            events.append(row(ts, it, "keep", best, best, valid=True, note=f"value={int(best)}"))
        events.append(budget(ts, it * 10.0 + 1, 40 if it < 7 else 12, done=it))
        if it == 6:  # `crucible budget --iterations 12` takes effect at the head of iteration 7
            events.append(note(ts + 0.5, "budget set by the operator: 12 iterations"))
            events.append(budget(ts + 0.5, it * 10.0 + 1.5, 12, done=it))
    events += [note(T0 + 125, "stopping at the iteration head: iterations spent (12/12)")]
    events += [summary(T0 + 125, best, 10, 2), shutdown(T0 + 126)]
    return events


EXPECTED = """\
crucible 0.1.0: value (higher), backend command, world git; budget 40 iterations
[  1.0s] iter  0/40 baseline score 0          best 0
[ 11.0s] iter  1/40 keep     score 1          best 1          value=1
[ 21.0s] iter  2/40 keep     score 2          best 2          value=2
[ 31.0s] iter  3/40 invalid  score -          best 2          value.txt does not hold a whole number
[ 41.0s] iter  4/40 discard  score 1          best 2          the measure found the candidate slower than the incumbent…
[ 51.0s] iter  5/40 keep     score 3          best 3          value=3
[ 1m01s] iter  6/40 keep     score 4          best 4          value=4
[ 1m01s] budget set by the operator: 12 iterations
[ 1m11s] iter  7/12 keep     score 5          best 5          value=5
[ 1m21s] iter  8/12 keep     score 6          best 6          value=6
[ 1m31s] iter  9/12 keep     score 7          best 7          value=7
[ 1m41s] iter 10/12 keep     score 8          best 8          value=8
[ 1m51s] iter 11/12 keep     score 9          best 9          value=9
[ 2m01s] iter 12/12 keep     score 10         best 10         value=10
[ 2m05s] stopping at the iteration head: iterations spent (12/12)
best 10 (baseline 0); 10 kept, 2 discarded (1 invalid); $0.2500 spent; 2m06s active
best by iteration  ▁▂▂▂▂▃▄▅▅▆▇▇█  0 → 10
run ended: finished (iterations spent (12))
"""


def test_the_plain_console_line_by_line() -> None:
    assert show(ConsoleReporter, a_run()) == EXPECTED


def test_columns_hold_from_the_first_iteration_to_the_last() -> None:
    rows = [line for line in EXPECTED.splitlines() if "] iter " in line]
    for column in ("score ", "best "):
        assert len({line.index(column) for line in rows}) == 1, column


def test_headless_prints_warnings_and_exactly_one_closing_line() -> None:
    events = a_run()
    events.insert(5, note(T0 + 30, "the workspace was tampered with", level="warn"))
    assert show(HeadlessReporter, events).splitlines() == [
        "[ 30.0s] warn: the workspace was tampered with",
        "run ended: finished (iterations spent (12)); best 10 (baseline 0); 10 kept, 2 discarded "
        "(1 invalid); $0.2500 spent; 2m06s active",
    ]


def test_elapsed_continues_across_a_resume() -> None:
    first = [start(T0, 5), row(T0 + 1, 0, "baseline", 0, 0), budget(T0 + 1, 90.0, 5)]
    first += [row(T0 + 11, 1, "keep", 1, 1), budget(T0 + 11, 100.0, 5, done=1)]
    # the process died; a day later the run resumes
    later = T0 + 86_400
    second = [
        start(later, 5, resumed=True),
        note(later + 0.1, "resuming after 9 events: iteration 1"),
        budget(later + 0.2, 100.0, 5, done=1),
        row(later + 10.2, 2, "keep", 2, 2),
    ]
    # the resumed process's own console knows the run's time once the budget event carries it
    assert show(ConsoleReporter, second, total=5).splitlines()[1:] == [
        "[      ] resuming after 9 events: iteration 1",
        "[ 1m50s] iter 2/5 keep     score 2          best 2",
    ]
    # a view of the whole log (`crucible view`) never counts the day the run was down
    assert show(ConsoleReporter, first + second, total=5).splitlines()[-1] == (
        "[ 1m50s] iter 2/5 keep     score 2          best 2"
    )


def test_parked_time_does_not_count() -> None:
    events = [start(T0, 3), row(T0 + 1, 0, "baseline", 0, 0), budget(T0 + 1, 1.0, 3)]
    events += [note(T0 + 2, "paused by the operator at the iteration head"), phase(T0 + 2, "paused", 0)]
    events += [note(T0 + 600, "unpaused by the operator: continuing"), phase(T0 + 600, "iteration", 1)]
    events += [row(T0 + 610, 1, "keep", 1, 1)]
    assert show(ConsoleReporter, events, total=3).splitlines()[2:] == [
        "[  2.0s] paused by the operator at the iteration head",
        "[  2.0s] unpaused by the operator: continuing",
        "[ 12.0s] iter 1/3 keep     score 1          best 1",
    ]


def test_escape_sequences_in_notes_never_reach_the_terminal() -> None:
    events = [start(T0, 3), row(T0 + 1, 0, "baseline", 0, 0, note="\x1b]0;owned\x07\x1b[31mred\x1b[0m")]
    text = show(ConsoleReporter, events, total=3)
    assert "\x1b" not in text and "red" in text


def test_notes_are_cut_at_a_word_boundary() -> None:
    assert shorten("alpha beta gamma delta", 16) == "alpha beta…"
    assert shorten("alpha beta gamma delta", 16, ellipsis="...") == "alpha beta..."
    assert shorten("short", 16) == "short"
    assert shorten("a\nmulti   line\tnote", 40) == "a multi line note"
    assert shorten("x" * 30, 10) == "x" * 9 + "…"  # one long word is cut where it must be


def test_a_terminal_without_unicode_gets_ascii() -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    reporter = ConsoleReporter(out, 40, clock=lambda: 0.0)
    for event in a_run():
        reporter.on_event(event)
    out.flush()
    text = out.buffer.getvalue().decode("ascii")  # type: ignore[attr-defined]
    assert "the incumbent...\n" in text and "best by iteration  _....-~==+**#  0 -> 10\n" in text


def test_sparkline() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([3, 3, 3]) == "▁▁▁"
    assert sparkline([None, 1, 2]) == " ▁█"
    assert sparkline([]) == ""
    assert len(sparkline(list(range(500)), width=40)) == 40
    assert sparkline(list(range(500)), width=40).endswith("█")


def test_status_in_words() -> None:
    from crucible_core.cli.control_cmd import status_lines, where_line

    budget = {"iterations": 9, "max_cost": 5.0, "max_time": 7200.0}
    assert where_line({"phase": "iteration", "iter": 4, "step": "measure", "budget": budget}) == (
        "running iteration 4 of 9: measuring the candidate"
    )
    assert (
        where_line({"phase": "parked", "iter": 3, "step": "decide"})
        == "waiting for an approval after iteration 3"
    )
    assert (
        where_line({"phase": "distressed", "iter": 3})
        == "suspended by the agent's distress call after iteration 3"
    )
    assert where_line({"phase": "finished", "iter": 9}) == "finished after iteration 9"
    assert status_lines(
        {
            "phase": "parked",
            "iter": 3,
            "best": 2.5,
            "baseline": 1.0,
            "kept": 2,
            "discarded": 1,
            "spent": 0.5,
            "budget": budget,
            "approval": {"handle": "ask-1", "mode": "block"},
        }
    ) == [
        "waiting for an approval after iteration 3 of 9",
        "best 2.5 (baseline 1); 2 kept, 1 discarded",
        "spent $0.5000; budget 9 iterations, $5.00, 2h00m active",
        "approval pending (block): ask-1; `crucible approve` or `crucible deny` answers it",
    ]


def test_a_resume_after_a_clean_exit_says_how_the_previous_process_ended_not_iteration_0() -> None:
    from crucible_core.contract import wire
    from crucible_core.contract.fold import fold_events
    from crucible_core.contract.recovery import classify
    from crucible_core.reporters.console_text import event_lines
    from crucible_core.reporters.console_view import ConsoleView

    ended = [
        wire.Row(row=wire.RowWire(iter=3, decision="keep", note="", detail="", score=3.0), solved=False),
        wire.Shutdown(outcome="error", reason="the measure broke"),
    ]
    recovery = classify(fold_events(wire.Line(event=e) for e in ended))
    assert recovery.cls is wire.RecoveryClass.CLEAN_EXIT
    event = wire.Recovery(cls=recovery.cls, iter=recovery.iter, detail=recovery.detail)
    [line] = event_lines(ConsoleView(), wire.Line(event=event, ts=0.0), 0.0)
    assert "ended cleanly: previous run exited error: the measure broke" in line
    assert "iteration 0" not in line


FIXTURE = Path(__file__).parent.parent / "fixtures" / "crucible_session.jsonl"


def _counting(real: Any, decoded: list[str]) -> Any:
    def counting(obj: Any) -> wire.Line | None:
        decoded.append(obj.get("kind"))
        return real(obj)  # type: ignore[no-any-return]

    return counting


def test_events_the_lines_neither_fold_nor_print_are_passed_over_undecoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real log (every kind it holds, agent text included) through the reporter, which skips
    decoding what changes nothing, and through a fold of every event: the same lines, the same view."""
    parsed = (wire.parse_object(raw.encode()) for raw in FIXTURE.read_text().splitlines())
    events = [event for event in parsed if event is not None]  # its torn line left out
    at = events.index(next(e for e in events if e["kind"] == "phase" and e["phase"] == "iteration"))
    events.insert(at + 1, {"v": 1, "kind": "step", "step": "propose", "iter": 1})  # the fixture has none
    assert isinstance(wire.from_object(events[at + 1]).event, wire.Step)  # type: ignore[union-attr]
    events += [{**e, "ts": T0 + 900 + i} for i, e in enumerate(events)]  # a resume in the same log
    for make in (ConsoleReporter, HeadlessReporter):
        every = make(io.StringIO(), 40, clock=lambda: T0)
        for event in events:
            folded = every.fold(event)
            if folded is not None:
                for text in every.lines_for(*folded):
                    every.output.line(plain(text))
        decoded: list[str] = []
        monkeypatch.setattr(wire, "from_object", _counting(wire.from_object, decoded))
        skipping = make(io.StringIO(), 40, clock=lambda: T0)
        for event in events:
            skipping.on_event(event)
        monkeypatch.undo()
        assert skipping.stream.getvalue() == every.stream.getvalue() != ""
        every.view.step = skipping.view.step  # the operation under way: a live table's, never a line's
        assert skipping.view == every.view
        # the agent's text, a turn's start and end, identities: passed over
        assert {"agent", "agent_start", "agent_done", "identity", "step"}.isdisjoint(decoded)
        assert {"start", "row", "budget", "shutdown"} <= set(decoded)
