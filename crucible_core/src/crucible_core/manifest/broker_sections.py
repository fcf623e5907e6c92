"""The manifest sections the broker reads: `[outputs.<kind>]`, `[[capabilities.secret]]`, `[agent.broker]`.

Shape checks that need no plugin live here (`validate`); checks against the installed kind
vocabulary and tool names happen when the broker resolves the declaration
(crucible_core/broker/declaration.py). Pure values: the manifest layer imports nothing above it.
"""

from __future__ import annotations

import re

import attrs

from crucible_core.contract.records import value_methods


# -- targets -----------------------------------------------------------------------------------
@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class FixedTarget:
    """The one address writes of a kind land on (a write may name a sub-address of it)."""

    fixed: str

    def to_wire(self) -> dict[str, object]:
        return {"fixed": self.fixed}


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class OpenScope:
    scope: str
    param: str | None = None  # a run parameter the target must equal


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class OpenTarget:
    """Writes may address anything the scope admits, chosen by the caller (or pinned by `param`)."""

    open: OpenScope

    def to_wire(self) -> dict[str, object]:
        return {"open": {"scope": self.open.scope, "param": self.open.param}}


def scope_is_unbounded(scope: str) -> bool:
    """True for a scope that constrains nothing: empty, or only wildcards and separators."""
    return not any(ch.isalnum() or ch in "-_." for ch in scope.strip())


SECRET_CONTEXTS = ("broker", "agent")
# compiled by `re` at the first check: only a manifest with [agent.broker] secrets or params has one
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class OutputDeclaration:
    """`[outputs.<kind>]`: a per-run count and, for a kind that addresses one, the target."""

    count: int
    target: FixedTarget | OpenTarget | None = None


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class SecretCapability:
    """`[[capabilities.secret]]`: what one credential authorizes and whether the agent sees it."""

    name: str
    context: str  # "broker": held host-side; "agent": the value enters the agent's environment
    system: str  # the external system it authorizes
    scope: str  # at what scope, in words a reviewer can check


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class CapabilitiesSection:
    secret: tuple[SecretCapability, ...] = ()


@value_methods
@attrs.frozen(repr=False, eq=False, slots=False)
class BrokerSection:
    """`[agent.broker]`: whether turns get the broker, and which of its tools they are granted."""

    # None: not written, the agent's default (on, except for a backend that takes the broker
    # only when asked, such as `command`: its program may never call it).
    enabled: bool | None = None
    tools: tuple[str, ...] | None = None  # None grants every installed tool

    def asked(self) -> bool:
        """The manifest asks for the broker in so many words: `enabled = true` or tools named."""
        return self.enabled is True or bool(self.tools)


def validate(outputs: dict[str, OutputDeclaration], capabilities: CapabilitiesSection) -> list[str]:
    """Problems in the sections' own shape, each naming its key."""
    problems: list[str] = []
    for kind, declaration in outputs.items():
        where = f"[outputs.{kind}]"
        if declaration.count < 0:
            problems.append(f"{where}.count must be 0 or more")
        target = declaration.target
        if isinstance(target, FixedTarget) and not target.fixed.strip():
            problems.append(f"{where}.target.fixed must not be empty")
        if isinstance(target, OpenTarget):
            if scope_is_unbounded(target.open.scope):
                problems.append(
                    f"{where}.target.open.scope {target.open.scope!r} admits any target; "
                    "name a narrower scope (for example PROJ-* or org/repo)"
                )
            param = target.open.param
            if param is not None and not re.fullmatch(_ENV_NAME, param):
                problems.append(f"{where}.target.open.param {param!r} is not a parameter name")
    seen: set[str] = set()
    for index, secret in enumerate(capabilities.secret):
        where = f"[[capabilities.secret]][{index}]"
        if not re.fullmatch(_ENV_NAME, secret.name):
            problems.append(f"{where}.name {secret.name!r} is not an environment variable name")
        if secret.name in seen:
            problems.append(f"{where}.name {secret.name!r} is disclosed twice")
        seen.add(secret.name)
        if secret.context not in SECRET_CONTEXTS:
            problems.append(f"{where}.context must be one of {', '.join(SECRET_CONTEXTS)}")
        for key in ("system", "scope"):
            if not getattr(secret, key).strip():
                problems.append(f"{where}.{key} must say what the secret authorizes")
    return problems
