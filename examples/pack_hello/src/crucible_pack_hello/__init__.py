"""crucible-pack-hello: registers the `hello` domain pack (the directory beside this module)."""

from __future__ import annotations

from pathlib import Path

from crucible_core.api import Register, hookimpl


@hookimpl
def crucible_register_packs(register: Register[Path]) -> None:
    register("hello", Path(__file__).resolve().parent / "pack")
