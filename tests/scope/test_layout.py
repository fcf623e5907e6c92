"""The scope plugin's own graph layout: layers by longest path, measurement grouped, labels bounded."""

from __future__ import annotations

from crucible_core.api import iteration_plan, validate_plan
from crucible_core.plan import ir
from crucible_core.plan.iteration import core_kinds
from crucible_scope.draw import to_svg
from crucible_scope.layout import MAX_LABEL, NODE_W, lay_out, layers


def _task(name: str, *deps: str, required: bool = True) -> ir.Task:
    return ir.Task(name=name, kind="command", fields=None, depends_on=deps, required=required)


def test_a_task_sits_one_layer_past_its_longest_dependency_chain() -> None:
    # a -> b -> c -> d and a -> d: d is placed by the long way round, not the short edge
    tasks = [_task("a"), _task("b", "a"), _task("c", "b"), _task("d", "a", "c"), _task("e")]
    assert layers(tasks, ["a", "b", "c", "d", "e"]) == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 0}


def test_the_iteration_graph_is_a_row_with_measurement_boxed() -> None:
    plan = validate_plan(iteration_plan(), core_kinds(), owns_world_and_judge=True, source="test")
    layout = lay_out(plan)
    assert [(n.name, n.layer, n.row) for n in layout.nodes] == [
        ("propose", 0, 0),
        ("apply", 1, 0),
        ("measure", 2, 0),
        ("decide", 3, 0),
    ]
    assert layout.edges == (("propose", "apply"), ("apply", "measure"), ("measure", "decide"))
    [group] = layout.groups
    measure = layout.node("measure")
    assert group.label == "Measurement"
    assert group.x < measure.x and group.x + group.w > measure.x + NODE_W
    assert all(n.x + NODE_W <= layout.width for n in layout.nodes)


def test_hostile_task_names_are_escaped_and_cut() -> None:
    name = "<script>alert(1)</script>" + "x" * 80
    plan = ir.ValidPlan(
        plan=ir.Plan(version=ir.PLAN_VERSION, budget=ir.Budget(0.0), tasks=(_task(name),)),
        order=(name,),
        dependents={name: ()},
    )
    svg = to_svg(lay_out(plan), "title & more")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "x" * (MAX_LABEL + 1) not in svg
