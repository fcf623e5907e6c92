"""The ceilings a workflow compilation runs under; each is checked before the work it bounds."""

from __future__ import annotations

import attrs


@attrs.frozen
class Bounds:
    source_bytes: int = 256 * 1024  # one .star file, checked before it is parsed
    nesting: int = 64  # bracket and indentation depth, pre-scanned before parsing
    lines: int = 20_000
    modules: int = 32  # load()ed modules, counted as each is admitted
    total_bytes: int = 2 * 1024 * 1024  # every source and prompt file read, together
    prompt_bytes: int = 256 * 1024  # one prompt_file() or SKILL.md
    ticks: int = 20_000  # evaluation slices (about 1,000 bytecode steps each)
    call_depth: int = 64  # Starlark call stack
    heap_bytes: int = 512 * 1024 * 1024  # resident memory the compiling child may grow to
    address_space_bytes: int = 2 * 1024 * 1024 * 1024  # hard limit on the child (RLIMIT_AS)
    seconds: float = 20.0  # the child is killed at this deadline
    tasks: int = 500  # tasks constructed
    value_items: int = 20_000  # elements in one constructor argument, walked before use
    string_bytes: int = 256 * 1024  # one string argument

    def to_json(self) -> dict[str, float | int]:
        return attrs.asdict(self)
