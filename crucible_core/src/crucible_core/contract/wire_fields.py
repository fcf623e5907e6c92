"""How a session-wire record declares its fields, and the values the wire's records share.

A field is written always (a plain attrs field), only when not empty (`omitted`, and `ours` for
an additive field of ours), unless it is None (`omitted_if_none`), or under another name
(`renamed`); the converter in `wire.py` reads these marks. Here too: the enumerations and the
ask-key rules that records of both `wire.py` and `wire_rare.py` use. Names are used through
`wire`; this module is apart only so that `wire_rare.py` needs nothing of `wire.py` itself.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Callable
from typing import Any

import attrs

_OMIT = "wire_omit_empty"
_OMIT_NONE = "none"  # the _OMIT value of a field omitted only when None
_NAME = "wire_name"


def ours(default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """An additive field of ours: optional on decode, left out of the line when empty."""
    if factory is not None:
        return attrs.field(factory=factory, metadata={_OMIT: True})
    return attrs.field(default=default, metadata={_OMIT: True})


def omitted(default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A contract field written only when non-empty (serde `skip_serializing_if`)."""
    return ours(default, factory=factory)


def omitted_if_none() -> Any:
    """A contract field written unless it is None (serde `skip_serializing_if = "Option::is_none"`):
    an empty value is still a value."""
    return attrs.field(default=None, metadata={_OMIT: _OMIT_NONE})


def renamed(name: str, **kwargs: Any) -> Any:
    return attrs.field(metadata={_NAME: name}, **kwargs)


STAGE_ITERATION = "iteration"  # the contract's token for the per-iteration graph ("epilogue" the other)


def _wire_stage(stage: str) -> str:
    # The plan IR calls the per-iteration graph "main", and so did logs our older writers left:
    # both are written and read as the contract's "iteration".
    return STAGE_ITERATION if stage == "main" else stage


class RecoveryClass(enum.StrEnum):
    CLEAN_EXIT = "clean_exit"
    DIED_IN_BASELINE = "died_in_baseline"
    DIED_IN_WIDE_ROUND = "died_in_wide_round"
    DIED_MID_TURN = "died_mid_turn"
    DIED_DECIDING = "died_deciding"
    DIED_IN_PLAN_TASK = "died_in_plan_task"
    DIED_AWAITING_APPROVAL = "died_awaiting_approval"
    DIED_BETWEEN_ITERATIONS = "died_between_iterations"


class SessionAction(enum.StrEnum):
    STARTED = "started"
    RESUMED = "resumed"


class RawStream(enum.StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"


MAX_ASK_KEY_BYTES = 256  # the contract's bound for keys that cross to an orchestrator


def ask_key_problem(key: object, *, what: str = "an ask key") -> str | None:
    """Why `key` cannot be an ask key (the contract's AskKey rules), or None.

    A key names the same item on every run and survives an NDJSON field, a queue key and a
    primary key: non-empty, at most 256 bytes, no control character, no whitespace.
    """
    if not isinstance(key, str):
        return f"{what} must be a string"
    if not key:
        return f"{what} is empty"
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_ASK_KEY_BYTES:
        return f"{what} is {size} bytes; at most {MAX_ASK_KEY_BYTES}"
    shown = key if len(key) <= 40 else key[:40] + "..."
    if any(unicodedata.category(ch) == "Cc" for ch in key):
        return f"{what} {shown!r} contains a control character"
    if any(ch.isspace() for ch in key):
        return f"{what} {shown!r} contains whitespace"
    return None


def ask_workflow_problem(workflow: object) -> str | None:
    """Why `workflow` cannot name an ask's workflow, or None: a key's rules, and no ':' (the
    orchestrator's queue key is `ask:<workflow>:<key>`, split from the left)."""
    problem = ask_key_problem(workflow, what="an ask's workflow name")
    if problem is None and ":" in str(workflow):
        return f"an ask's workflow name {workflow!r} contains ':'"
    return problem


def ask_problem(item: object) -> str | None:
    """Why `item` is not an ask ({key, workflow, params}), or None."""
    if not isinstance(item, dict) or set(item) - {"key", "workflow", "params"}:
        return "an ask is {key, workflow, params} and nothing else"
    return ask_key_problem(item.get("key")) or ask_workflow_problem(item.get("workflow"))


def _refuse(problem: Callable[[Any], str | None]) -> Callable[[Any, Any, Any], None]:
    def check(_instance: Any, _attribute: Any, value: Any) -> None:
        found = problem(value)
        if found is not None:
            raise ValueError(found)

    return check
