"""Output kinds (the vocabulary of mediated writes), their resolved bounds, and target scopes.

A kind names one sort of write a run makes outside its workspace (a draft PR, a tracker
comment, ...); plugins register them (crucible-plugin-publish-github the forge's kinds,
crucible-plugin-broker-mcp the rest of the standard set). The names are a versioned contract: a
retired name is never reused with a different meaning. Every kind resolves to a bound for a run,
from the pack's `[outputs.<kind>]` or from the kind's defaults; a default always carries a count
and never an open target.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from crucible_core.contract.records import value_methods

# The target shapes are manifest values; the mediation logic below works on them.
from crucible_core.errors import CrucibleError, ExitCode
from crucible_core.manifest.broker_sections import FixedTarget, OpenScope, OpenTarget, scope_is_unbounded

OUTPUTS_WIRE_VERSION = 1


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class OutputKindSpec:
    """One output kind: what a plugin registers through crucible_register_output_kinds.

    `addresses_target` says whether a write lands on an addressable target (a repository, a
    tracker item, ...); such a kind needs a target in its declaration. `default_target_env`
    names an environment variable that supplies the engine-default fixed target, if any.
    """

    name: str
    description: str
    default_count: int
    addresses_target: bool = True
    default_target: str | None = None
    default_target_env: str | None = None

    def __attrs_post_init__(self) -> None:
        if not KIND_NAME.fullmatch(self.name):
            raise ValueError(f"output kind {self.name!r} must be lower-case words joined by '-'")
        if self.default_count < 0:
            raise ValueError(f"output kind {self.name!r} has a negative default count")


KIND_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")

_ADDRESS_BOUNDARY = ("/", ":", "@", "#")

Target = FixedTarget | OpenTarget

__all__ = ["FixedTarget", "OpenScope", "OpenTarget", "scope_is_unbounded"]


def scope_admits(scope: str, value: str) -> bool:
    """Whether `value` lies inside `scope`.

    A scope with `*` is an anchored glob (`*` = any run of characters). A literal scope admits
    itself and anything extending it past an address boundary, so `quay.io/team` admits
    `quay.io/team/app:1` but not `quay.io/team-evil/app`, and `PROJ-12` does not admit `PROJ-123`.
    """
    if not scope:
        return False
    if "*" in scope:
        pattern = ".*".join(re.escape(part) for part in scope.split("*"))
        return re.fullmatch(pattern, value, flags=re.S) is not None
    if value == scope:
        return True
    return value.startswith(scope) and value[len(scope)] in _ADDRESS_BOUNDARY


# -- resolved bounds ---------------------------------------------------------------------------
@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class ResolvedOutput:
    kind: str
    count: int
    target: Target | None  # None: a targetless kind, or an addressing kind that resolved none
    source: str  # "manifest" or "engine-default"
    addresses_target: bool = True
    description: str = ""

    def to_wire(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "count": self.count,
            "target": self.target.to_wire() if self.target is not None else None,
            "source": self.source,
        }

    def describe_target(self) -> str:
        if not self.addresses_target:
            return "no target (addresses nothing outside the run)"
        if self.target is None:
            return "no target resolved: every write is refused"
        if isinstance(self.target, FixedTarget):
            return f"fixed {self.target.fixed}"
        scope = self.target.open
        bound = f", must equal run parameter {scope.param!r}" if scope.param else ""
        return f"open within {scope.scope}{bound}"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class Violation:
    """Why a write was refused; `bound` names the violated bound as a manifest key."""

    kind: str
    bound: str
    message: str


class OutputRefused(CrucibleError):
    """A mediated write outside its bound; the message names the bound."""

    exit_code = ExitCode.USAGE

    def __init__(self, violation: Violation) -> None:
        super().__init__(
            violation.message, hint=f"the bound is {violation.bound}; it cannot be changed mid-run"
        )
        self.violation = violation


def param_problems(outputs: tuple[ResolvedOutput, ...], params: Mapping[str, str]) -> list[str]:
    """Run parameters a parameter-bound scope does not admit: such a run could never write, so it
    is refused at run start. A parameter the run lacks is not a problem here: each write of that
    kind is refused instead, naming the parameter."""
    problems = []
    for bound in outputs:
        if isinstance(bound.target, OpenTarget) and bound.target.open.param is not None:
            scope = bound.target.open
            value = params.get(scope.param or "")
            if value is not None and not scope_admits(scope.scope, value):
                problems.append(
                    f"run parameter {scope.param} = {value!r} is outside "
                    f"[outputs.{bound.kind}].target.open.scope = {scope.scope!r}"
                )
    return problems
