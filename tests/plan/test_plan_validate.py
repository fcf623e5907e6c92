"""Plan admission: each structural rule refuses a bad plan before anything runs, naming the problem."""

from __future__ import annotations

import pytest

from crucible_core.plan.errors import PlanError
from tests.plan.plan_support import core_kinds, parse

HEAD = "version = 1\n[budget]\nusd = 1.0\n"


def refused(body: str, **kwargs: object) -> str:
    with pytest.raises(PlanError) as info:
        parse(HEAD + body, **kwargs)
    return info.value.render()


def cmd(name: str, *extra: str) -> str:
    lines = [f'name = "{name}"', 'kind = "command"', 'command = "true"', *extra]
    return "[[task]]\n" + "\n".join(lines) + "\n"


def test_a_valid_plan_orders_dependencies_first_in_declaration_order() -> None:
    plan = parse(HEAD + cmd("c", 'depends_on = ["a"]') + cmd("a") + cmd("b"))
    assert plan.order == ("a", "c", "b")  # c is declared first, so it goes as soon as a allows


def test_cycles_are_named() -> None:
    message = refused(
        cmd("a", 'depends_on = ["c"]') + cmd("b", 'depends_on = ["a"]') + cmd("c", 'depends_on = ["b"]')
    )
    assert "cycle" in message
    assert "a -> b -> c -> a" in message or "b -> c -> a -> b" in message or "c -> a -> b -> c" in message


def test_unknown_and_self_dependencies() -> None:
    message = refused(cmd("a", 'depends_on = ["ghost"]') + cmd("b", 'depends_on = ["b"]'))
    assert "unknown task 'ghost'" in message
    assert "'b' depends on itself" in message


def test_unknown_keys_are_refused_with_the_task_and_a_suggestion() -> None:
    message = refused(cmd("a", 'depend_on = ["x"]'))
    assert "[[task]] #1 ('a')" in message
    assert "depend_on" in message and "did you mean 'depends_on'" in message
    assert "unknown key(s) colour at the top level" in refused_raw("colour = 1\n" + HEAD + cmd("a"))
    assert "unknown key(s) colour in [budget]" in refused("colour = 1\n" + cmd("a"))


def test_wrong_types_name_the_key() -> None:
    message = refused(cmd("a", "required = 3"))
    assert "required" in message and "true or false" in message
    assert "'sometimes' is not one of all, passed, settled" in refused(cmd("a", 'join = "sometimes"'))


def test_unknown_kinds_suggest_the_closest() -> None:
    message = refused('[[task]]\nname = "a"\nkind = "comand"\ncommand = "true"\n')
    assert "unknown task kind 'comand'" in message and "did you mean 'command'?" in message
    assert "unknown engine op 'propse'" in refused('[[task]]\nname = "a"\nkind = "engine"\nop = "propse"\n')


def test_budget_and_version_rules() -> None:
    assert "[budget].usd must be a positive" in refused_raw("version = 1\n[budget]\nusd = 0\n" + cmd("a"))
    assert "version 2 is not supported" in refused_raw("version = 2\n[budget]\nusd = 1\n" + cmd("a"))
    assert "[budget].usd is required" in refused_raw("version = 1\n" + cmd("a"))


def refused_raw(text: str) -> str:
    with pytest.raises(PlanError) as info:
        parse(text)
    return info.value.render()


def test_top_k_needs_score_from_producers_that_declare_emits() -> None:
    topk = '[[task]]\nname = "pick"\nkind = "top_k"\nk = 1\ndirection = "lower"\ndepends_on = ["a"]\n'
    message = refused(cmd("a", 'emits = ["pass"]') + topk)
    assert "ranks 'a' by score, but 'a' declares emits without \"score\"" in message
    parse(HEAD + cmd("a", 'emits = ["score"]') + topk)  # declared score: admitted
    parse(HEAD + cmd("a") + topk)  # undeclared: nothing to check
    assert "cannot declare emits" in refused(
        cmd("a") + topk.replace("depends_on", 'emits = ["x"]\ndepends_on')
    )


def test_sessions_must_be_dependency_ordered_and_never_isolated() -> None:
    agent = '[[task]]\nname = "{n}"\nkind = "agent"\nprompt = "p"\nsession = "solver"\n{extra}\n'
    message = refused(agent.format(n="a", extra="") + agent.format(n="b", extra=""))
    assert "share session 'solver' but neither depends on the other" in message
    parse(HEAD + agent.format(n="a", extra="") + agent.format(n="b", extra='depends_on = ["a"]'))
    assert "cannot be isolated" in refused(agent.format(n="a", extra='isolation = "worktree"'))
    assert "cannot bind a session" in refused(cmd("a", 'session = "solver"'))


def test_a_required_task_cannot_hang_on_an_advisory_one_through_join_all() -> None:
    message = refused(cmd("adv", "required = false") + cmd("main", 'depends_on = ["adv"]'))
    assert "required but needs advisory task 'adv' to pass" in message
    parse(HEAD + cmd("adv", "required = false") + cmd("main", 'depends_on = ["adv"]', 'join = "settled"'))


def test_engine_kinds_are_refused_in_a_standalone_plan_and_admitted_with_a_world() -> None:
    engine = '[[task]]\nname = "p"\nkind = "engine"\nop = "propose"\n'
    assert "engine operation" in refused(engine) and "World and a frozen Judge" in refused(engine)
    plan = parse(HEAD + engine, owns_world_and_judge=True)
    assert plan.tasks[0].kind == "engine_propose"


def test_epilogue_cannot_depend_on_main_and_settled_join_needs_dependencies() -> None:
    assert "dependencies cannot cross stages" in refused(
        cmd("a") + cmd("e", 'stage = "epilogue"', 'depends_on = ["a"]')
    )
    assert "needs at least one dependency" in refused(cmd("a", 'join = "settled"'))


def test_emitted_file_paths_must_stay_inside() -> None:
    message = refused(cmd("a", 'emits_files = ["../x", "/etc/passwd", "ok/file"]'))
    assert "'../x'" in message and "'/etc/passwd'" in message and "ok/file" not in message


def test_a_plugin_can_add_a_kind() -> None:
    import attrs

    from crucible_core.plan.kinds import Attempt, Outcome, TaskKindSpec

    @attrs.frozen
    class Fields:
        word: str

    kinds = core_kinds()
    kinds.add(
        "echo",
        TaskKindSpec("echo", Fields, lambda ctx: Attempt(Outcome.PASS, {"w": ctx.task.fields.word})),
        "p",
    )
    plan = parse(HEAD + '[[task]]\nname = "e"\nkind = "echo"\nword = "hi"\n', kinds)
    assert plan.tasks[0].fields.word == "hi"


def test_early_completion_fields_cannot_be_declared() -> None:
    with pytest.raises(PlanError) as caught:
        parse(
            """
            version = 1
            [budget]
            usd = 1.0
            [[task]]
            name = "a"
            kind = "command"
            command = "true"
            emits = ["complete", "reason"]
            """
        )
    text = str(caught.value)
    assert "'complete' is reserved" in text and "'reason' is reserved" in text


def test_needs_takes_one_capability_as_a_string_or_a_list_of_one() -> None:
    plan = parse(HEAD + cmd("a", 'needs = ["service.cluster"]') + cmd("b", 'needs = "gpu"'))
    assert plan.plan.task("a").needs == "service.cluster"
    assert plan.plan.task("b").needs == "gpu"
    assert "needs names one capability" in refused(cmd("a", 'needs = ["gpu", "service.cluster"]'))
    assert "needs names one capability" in refused(cmd("a", "needs = []"))
