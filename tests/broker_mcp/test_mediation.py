"""The one mediation point: targets resolve inside their bound only, writes are counted and
recorded, and the count holds under concurrent writers."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from crucible_broker_mcp.mediation import Mediator, resolve_target, used_counts
from crucible_core.broker.outputs import (
    FixedTarget,
    OpenScope,
    OpenTarget,
    OutputRefused,
    ResolvedOutput,
    Violation,
)
from crucible_core.contract import wire


def bound(kind: str, target: Any, count: int = 2) -> ResolvedOutput:
    return ResolvedOutput(kind, count, target, "manifest", kind != "gpu-capture")


def test_targets_resolve_inside_their_bound_only() -> None:
    fixed = bound("image-push", FixedTarget("quay.io/team"))
    assert resolve_target(fixed, None, {}) == "quay.io/team"
    assert resolve_target(fixed, "quay.io/team/app:1", {}) == "quay.io/team/app:1"
    assert isinstance(resolve_target(fixed, "docker.io/evil", {}), Violation)
    open_ = bound("tracker-comment", OpenTarget(OpenScope("PROJ-*")))
    assert resolve_target(open_, "PROJ-4", {}) == "PROJ-4"
    assert isinstance(resolve_target(open_, None, {}), Violation)  # an open scope cannot invent one
    pinned = bound("tracker-comment", OpenTarget(OpenScope("PROJ-*", "issue")))
    assert resolve_target(pinned, None, {"issue": "PROJ-42"}) == "PROJ-42"
    sibling = resolve_target(pinned, "PROJ-43", {"issue": "PROJ-42"})
    assert isinstance(sibling, Violation) and sibling.bound == "[outputs.tracker-comment].target = PROJ-42"
    missing = resolve_target(pinned, "PROJ-42", {})
    assert isinstance(missing, Violation) and "open.param = issue" in missing.bound
    nothing = resolve_target(bound("draft-pr", None), None, {})
    assert isinstance(nothing, Violation) and nothing.bound == "[outputs.draft-pr].target"
    assert resolve_target(bound("gpu-capture", None), None, {}) is None


def test_the_mediator_counts_refuses_and_records() -> None:
    events: list[wire.Event] = []
    mediator = Mediator(
        [bound("tracker-comment", OpenTarget(OpenScope("PROJ-*")), count=2)],
        events.append,
        used={"tracker-comment": 1},  # a resumed run already spent one
    )
    assert mediator.admit("tracker-comment", "PROJ-1", by="post") == "PROJ-1"
    with pytest.raises(OutputRefused) as over:
        mediator.admit("tracker-comment", "PROJ-2", by="post", iteration=3)
    assert "[outputs.tracker-comment].count" in over.value.render()
    with pytest.raises(OutputRefused) as unknown:
        mediator.admit("teleport", None, by="engine")
    assert "not an output kind" in unknown.value.render()
    assert [type(e).__name__ for e in events] == ["OutputAdmitted", "OutputRefused", "OutputRefused"]
    assert wire.envelope(events[1]) == {
        "v": 1,
        "kind": "output_refused",
        "output_kind": "tracker-comment",
        "bound": "[outputs.tracker-comment].count = 2",
        "tool": "post",
        "detail": over.value.violation.message,
        "requested": "PROJ-2",
        "iter": 3,
    }
    assert used_counts([wire.envelope(e) for e in events]) == {"tracker-comment": 1}
    assert mediator.remaining() == {"tracker-comment": 0}


def test_the_mediator_admits_exactly_the_count_under_concurrency() -> None:
    admitted: list[str] = []
    mediator = Mediator([bound("gpu-capture", None, count=5)], lambda event: admitted.append(event.KIND))

    def write() -> None:
        with contextlib.suppress(OutputRefused):
            mediator.admit("gpu-capture", None, by="t")

    threads = [threading.Thread(target=write) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count("output_admitted") == 5 and admitted.count("output_refused") == 35
