"""The flow model folded from a crucible-shaped session log (its renderings are tested in tests/flow_page)."""

from __future__ import annotations

import json
from pathlib import Path

from crucible_core.flow.decode import decode_lines, read_session
from crucible_core.flow.fold import fold_flow

FIXTURE = Path(__file__).parent / "fixtures" / "crucible_run.jsonl"


def model():
    return fold_flow(read_session(FIXTURE))


def test_header_carries_goal_identity_outcome_best_and_spend() -> None:
    h = model().header
    assert h.goal.startswith("Lower the p99 latency")
    assert h.identity == "v2:3333333333333333" and h.direction == "lower"
    assert (h.outcome, h.reason) == ("budget", "cost budget spent")
    assert (h.baseline, h.best) == (277.0, 231.0)
    assert round(h.improvement_pct, 1) == 16.6  # lower is better: (277 - 231) / 277
    assert (h.spent_usd, h.elapsed_secs) == (2.89, 1388.0)
    # counted as the console counts: the invalid iteration is one of the discarded
    assert (h.kept, h.discarded, h.invalid) == (3, 2, 1)


def test_iterations_fold_agent_turns_ladders_and_decisions() -> None:
    its = {it.iter: it for it in model().iterations}
    assert sorted(its) == [1, 2, 3, 4, 5]
    one = its[1]
    assert [t.name for t in one.tools] == ["Read", "Grep", "Edit", "Bash"]
    assert one.agent_turns == 12 and one.agent_cost == 0.84
    assert one.final_text.startswith("Moved the endpoint-table read")
    assert [(r.name, r.status) for r in one.ladder] == [
        ("build", "pass"),
        ("refcheck", "pass"),
        ("bench", "pass"),
    ]
    assert "src/route.rs" in one.diffstat
    assert its[3].decision == "invalid" and its[3].score is None
    assert [r.status for r in its[3].ladder] == ["fail", "skipped", "skipped"]
    assert [it.best for it in its.values()] == [250.0, 250.0, 250.0, 240.0, 231.0]


def test_a_resume_drops_the_dead_turn_and_marks_the_boundary() -> None:
    m = model()
    assert [(r.before_iter, r.recovery) for r in m.resumes] == [(4, "died_mid_turn")]
    four = next(it for it in m.iterations if it.iter == 4)
    assert four.resumed_before
    # the dead predecessor's Read of src/alloc.rs is gone; only the redone round's edits remain
    assert [t.summary for t in four.tools] == [f"src/alloc.rs: candidate {n}" for n in (1, 2, 3)]


def test_a_wide_round_shows_its_candidates_and_keeps_the_winner() -> None:
    four = next(it for it in model().iterations if it.iter == 4)
    assert four.wide
    assert [(c.decision, c.score) for c in four.candidates] == [
        ("discard", 255.0),
        ("keep", 240.0),
        ("discard", 262.0),
    ]
    assert (four.decision, four.score) == ("keep", 240.0)


def test_plan_tasks_carry_their_statuses() -> None:
    plan = {t.name: t for t in model().plan}
    assert {n: t.status for n, t in plan.items()} == {
        "propose": "pass",
        "measure": "pass",
        "review": "blocked",
    }
    assert plan["measure"].depends_on == ["propose"] and plan["review"].note == "budget ceiling"


def test_our_older_flat_rows_decode_to_the_contract_shape() -> None:
    lines = [
        '{"v":1,"kind":"start","gate":"value","direction":"higher","budget":{"iterations":3}}',
        '{"v":1,"kind":"row","iter":0,"verdict":"baseline","score":0,"baseline":0}',
        '{"v":1,"kind":"agent_tool_call","iter":1,"name":"Bash","input":{"command":"./bump.sh"}}',
        '{"v":1,"kind":"agent_text","iter":1,"text":"bumped"}',
        '{"v":1,"kind":"row","iter":1,"verdict":"keep","score":1,"baseline":0,"snapshot":"abc"}',
        '{"v":1,"kind":"row","iter":2,"verdict":"discard","valid":false,"score":null,"note":"bad"}',
        '{"v":1,"kind":"budget","spent":0.5,"active_s":3.5}',
        "{torn",
    ]
    m = fold_flow(decode_lines(lines))
    assert [(it.iter, it.decision) for it in m.iterations] == [(1, "keep"), (2, "invalid")]
    assert m.iterations[0].tools[0].summary == "./bump.sh" and m.iterations[0].final_text == "bumped"
    assert (m.header.iterations_planned, m.header.elapsed_secs) == (3, 3.5)


def test_json_rendering_is_the_model_as_data() -> None:
    data = json.loads(json.dumps(model().to_wire()))
    assert data["version"] == 1 and len(data["iterations"]) == 5
    assert data["iterations"][3]["candidates"][1]["decision"] == "keep"


# our_run.jsonl is a log in the shape our own engine writes, written by hand: higher is better
# from a baseline of 0; a wide round before iteration 1 keeps 3; a scored workflow admits its
# graph every iteration; iteration 1 is invalid (a discard whose reading is not valid); a 0.5
# margin holds back iteration 3; iteration 4 scores far out (-500).
OUR_RUN = Path(__file__).parent / "fixtures" / "our_run.jsonl"


def our_model():
    return fold_flow(read_session(OUR_RUN))


def test_the_wide_round_before_iteration_1_is_a_column_and_moves_the_best() -> None:
    m = our_model()
    assert [(it.iter, it.decision, it.score) for it in m.iterations] == [
        (0, "keep", 3.0),
        (1, "invalid", None),
        (2, "keep", 4.0),
        (3, "discard", 4.2),
        (4, "discard", -500.0),
        (5, "keep", 6.0),
    ]
    wide = m.iterations[0]
    assert wide.wide and [(c.decision, c.score) for c in wide.candidates] == [("discard", 2.0), ("keep", 3.0)]
    assert [it.best for it in m.iterations] == [3.0, 3.0, 4.0, 4.0, 4.0, 6.0]  # the wide keep holds
    # the round spends no iteration: counted as the console counts
    assert [it.iter for it in m.deep_iterations] == [1, 2, 3, 4, 5]
    assert (m.header.kept, m.header.discarded, m.header.invalid) == (2, 3, 1)


def test_a_discard_a_margin_held_back_names_the_score_it_needed() -> None:
    three = our_model().iterations[3]
    assert three.note == "needed above 4.5 (best 4, margin 0.5); value=4.2"


def test_each_iteration_keeps_its_own_graph() -> None:
    m = our_model()
    assert m.plan == []  # no run-level plan: the graph belongs to each iteration
    by_iter = {it.iter: {t.name: t.status for t in it.plan} for it in m.iterations}
    assert by_iter[1] == {"candidate": "pass", "review": "fail", "score": "blocked", "decide": "blocked"}
    assert by_iter[2] == {"candidate": "pass", "review": "pass", "score": "pass", "decide": "pass"}
    assert by_iter[0] == {}


def test_versus_a_baseline_of_zero_is_the_change_itself() -> None:
    from crucible_core.flow.model import versus_baseline

    assert versus_baseline(0.0, 4.0, "higher") == "+4" and versus_baseline(0.0, 4.0, "lower") == "-4"
    assert versus_baseline(200.0, 150.0, "lower") == "+25.0%" and versus_baseline(None, 1.0, "higher") == ""
